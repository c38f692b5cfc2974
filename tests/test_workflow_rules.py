"""The workflow's shape (issue 33): one rule file per stage, `common.smk` of checks and input functions
only, every rule one `embprof` call, the suite's facts read without `sys.path`, and what moved out of
the rules into the package (the EmbeddingCollection runs, the config check's cache)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_envs import workflow_rules

from embprof.workflow.checkout import SUITE_FACTS, suite_module
from embprof.workflow.code import STEP_COMMANDS
from embprof.workflow.preflight import suite_facts
from embprof.workflow.validation import validate_config

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
FAMILIES = {"embedding_collection.smk"}  # a config family of its own: its rules in one file
_DEFINED = re.compile(r"^(?:rule|checkpoint) (\w+):", re.MULTILINE)


def test_one_rule_file_per_stage_and_common_holds_no_rule() -> None:
    for path in sorted(RULES.glob("*.smk")):
        defined = _DEFINED.findall(path.read_text())
        if path.name == "common.smk":
            assert defined == [], "common.smk holds input functions and checks only"
        elif path.name not in FAMILIES:
            assert defined == [path.stem], f"{path.name} defines {defined}"
    included = re.findall(r'^include: "rules/(\w+\.smk)"', (REPO / "Snakefile").read_text(), re.MULTILINE)
    assert sorted(included) == sorted(p.name for p in RULES.glob("*.smk"))


def test_no_rule_file_edits_sys_path() -> None:
    for path in [REPO / "Snakefile", *RULES.glob("*.smk")]:
        assert "sys.path" not in path.read_text(), path.name


def test_every_rule_is_one_embprof_call_and_its_code_is_that_commands(tmp_path: Path) -> None:
    """The code digest of a step (embprof.workflow.code) is of the command its rule runs."""
    rules = workflow_rules(tmp_path)
    for name, (_, shell) in rules.items():
        if not shell:  # targets: what they ask for is their input
            assert name in {"all", "measure", "embedding_collection"}, name
            continue
        command = shell.split(" > {log}")[0]
        assert not re.search(r"&&|\|\||;|\|| rm | mv |\bif\b", command), f"{name}: {command}"
        called = re.findall(r"\bembprof ([a-z-]+)", command)
        assert len(called) == 1 and command.startswith("embprof "), f"{name}: {command}"
        if name in STEP_COMMANDS:
            assert called[0].replace("-", "_") == STEP_COMMANDS[name], name
    assert set(STEP_COMMANDS) <= set(rules)


def test_the_suites_facts_load_from_its_file_without_sys_path(tmp_path: Path) -> None:
    before = list(sys.path)
    facts = suite_facts(REPO)
    assert sys.path == before
    module = suite_module(REPO, SUITE_FACTS)
    assert module.__file__ == str(REPO / SUITE_FACTS) and not module.__name__.startswith("suite")
    assert facts.labels("smoke") == module.preset_labels("smoke") and len(facts.labels("smoke")) == 10
    assert suite_module(REPO, SUITE_FACTS) is module  # once per process
    # Another checkout's copy is its own module, never this one's.
    copy = tmp_path / "checkout"
    (copy / "suite").mkdir(parents=True)
    (copy / SUITE_FACTS).write_text((REPO / SUITE_FACTS).read_text().replace('"smoke": Preset(', '"tiny": Preset('))
    assert "tiny" in suite_module(copy, SUITE_FACTS).PRESETS and "tiny" not in module.PRESETS


def test_a_config_found_valid_is_remembered_and_no_other(tmp_path: Path) -> None:
    cache = tmp_path / "valid.json"
    validate_config({"preset": "smoke"}, cache=cache)
    assert len(json.loads(cache.read_text())) == 1
    validate_config({"preset": "smoke"}, cache=cache)  # the same config: nothing to add
    assert len(json.loads(cache.read_text())) == 1
    with pytest.raises(Exception, match="preset"):
        validate_config({"preset": "huge"}, cache=cache)
    assert len(json.loads(cache.read_text())) == 1
    cache.write_text("not json")  # only a shortcut: a broken cache is checked again
    validate_config({"preset": "seed"}, cache=cache)
    assert len(json.loads(cache.read_text())) == 1


# ---- the EmbeddingCollection runs (rules/embedding_collection.smk) ----

LAUNCHER = """#!/bin/sh
echo "launched: $* NPROC=$NPROC"
[ "$1" = fail ] && exit 3
while [ $# -gt 0 ]; do
  case "$1" in
    --results-file) echo '[{"run": 1}]' > "$2" ;;
    --trace-dir) mkdir -p "$2"; echo "no GPU" > "$2/L.skipped.txt" ;;
  esac
  shift
done
"""


def embprof(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "embprof", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_an_ec_run_replaces_its_output_only_when_the_launcher_succeeds(tmp_path: Path) -> None:
    launcher = tmp_path / "launch.sh"
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)
    done = embprof("ec-run", "--launcher", "launch.sh", "--nproc", "2", "--out", "t/r.json", "--",
                   "True", "False", "64", "--rows-scale", "0.5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "launched: True False 64 --rows-scale 0.5 --results-file" in done.stdout and "NPROC=2" in done.stdout
    assert json.loads((tmp_path / "t/r.json").read_text()) == [{"run": 1}]
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["r.json"]
    failed = embprof("ec-run", "--launcher", "launch.sh", "--out", "t/r.json", "--", "fail", cwd=tmp_path)
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1 and "exited with 3" in failed.stderr
    assert json.loads((tmp_path / "t/r.json").read_text()) == [{"run": 1}]
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["r.json"]
    profiled = embprof("ec-run", "--launcher", "launch.sh", "--profile", "--out", "traces/L", "--", "True", cwd=tmp_path)
    assert profiled.returncode == 0 and (tmp_path / "traces/L/L.skipped.txt").is_file()
    embprof("ec-run", "--launcher", "launch.sh", "--profile", "--out", "traces/L", "--", "fail", cwd=tmp_path)
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["L"]
    assert (tmp_path / "traces/L/L.skipped.txt").is_file()


def test_an_ec_breakdown_keeps_a_skip_note_and_names_an_empty_run(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces/L.skipped.txt").write_text("no GPU\n")
    done = embprof("ec-breakdown", "traces", "--out-dir", "opcalls/L", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "opcalls/L/L.skipped.txt").read_text() == "no GPU\n"
    (tmp_path / "empty").mkdir()
    failed = embprof("ec-breakdown", "empty", "--out-dir", "opcalls/L", cwd=tmp_path)
    assert failed.returncode == 1 and failed.stderr.strip().endswith("no trace (*.kineto.json.gz) and no skip note (*.skipped.txt)")
    assert (tmp_path / "opcalls/L/L.skipped.txt").is_file()
