"""docs/database.md is true: its schema is the schema of the file embprof writes, and each of its
example queries, run as written with sqlite-utils and sqlite3, answers its question."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from report_inputs import LABELS, iteration_ns, write_results

from embprof.cli import main
from embprof.labels import parse_label
from embprof.results.opcalls import read_opcalls
from embprof.results.paths import ResultsPaths
from embprof.results.samples import write_samples

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "database.md"
SCHEMA_BLOCK = re.compile(r"<!-- generated: db-schema -->\n(.*?)<!-- /generated -->", re.S)
CACHING = [label for label in LABELS if parse_label(label).mode == "caching"]


def section(title: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def slow_down(results: Path, label: str, op: str, factor: float) -> None:
    """The op's ms in the config's per-op CSV times ``factor`` (mean, total and every iteration)."""
    path = ResultsPaths(results).opcalls(label)
    frame = read_opcalls(path)
    rows = frame["op"] == op
    assert rows.any(), (label, op)
    frame.loc[rows, ["avg_ms_per_iter", "total_ms"]] *= factor
    frame.to_csv(path, index=False)
    write_samples(frame, iteration_ns(frame), ResultsPaths(results).samples(label))  # every iteration too


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """``results/embprof.sqlite`` holding last week's run and this week's (the docs' run ids):
    storage_find five times slower on both caching configs, cache_lookup slower on one only."""
    old_id, new_id = re.search(r"^OLD=(\S+) NEW=(\S+)$", PAGE.read_text(), re.M).groups()
    root = tmp_path_factory.mktemp("history")
    old = write_results(root / "results", failed=LABELS[0])
    new = Path(shutil.copytree(old, root / "week2", ignore=shutil.ignore_patterns("embprof.sqlite")))
    for label in CACHING:
        slow_down(new, label, "storage_find", 5.0)
    slow_down(new, CACHING[0], "cache_lookup", 2.0)
    assert main(["db", "write", "--results-dir", str(old), "--run-id", old_id]) == 0
    assert main(["db", "merge", str(new), "--into", str(old / "embprof.sqlite"), "--run-id", new_id]) == 0
    return root, old_id, new_id


def run_blocks(cwd: Path, blocks: list[str]) -> list[str]:
    """The shell blocks run in order in one shell (as a reader pastes them), each one's output."""
    marker = "@@ next block @@"
    script = "\n".join(f"echo '{marker}'\n{block}" for block in blocks)
    env = os.environ | {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    assert shutil.which("sqlite3", path=env["PATH"]), "sqlite3 is missing: make test-deps installs it"
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split(marker + "\n")[1:]


def test_the_schema_in_the_docs_is_the_schema_of_a_database_embprof_wrote(history, capsys) -> None:
    root, _, _ = history
    [documented] = SCHEMA_BLOCK.findall(PAGE.read_text())
    assert main(["db", "schema", str(root / "results" / "embprof.sqlite")]) == 0
    assert capsys.readouterr().out == documented
    for table in ("runs", "configs", "records", "timings", "opcalls", "busy", "summary", "op_shares", "costliest_ops"):
        assert f"### `{table}`" in documented


def test_the_example_queries_answer_their_questions(history) -> None:
    root, old_id, new_id = history
    blocks = re.findall(r"```sh\n(.*?)```", section("Example queries"), re.S)
    assert len(blocks) == 3
    slower, storage_find, summary = run_blocks(root, blocks)

    # Which ops got slower on every caching config: storage_find, not cache_lookup (slower on one).
    rows = [line.split() for line in slower.splitlines()[2:] if line.strip()]
    assert [row[:3] for row in rows] == [["dyn", "storage_find", str(len(CACHING))]], slower
    assert [float(v) for v in rows[0][3:]] == [400.0, 400.0]  # five times the time: 400% slower

    # Where storage_find is over 20% of dyn's step: this week's caching configs, no other.
    found = [line.split()[:2] for line in storage_find.splitlines()[2:] if line.strip()]
    assert sorted(found) == sorted([new_id, label] for label in CACHING), storage_find
    with_share = {line.split()[1]: float(line.split()[3]) for line in storage_find.splitlines()[2:] if line.strip()}
    assert all(share > 20 for share in with_share.values())

    # The summary table of this week's run: every config, the failed one without numbers, by ratio.
    table = list(csv.DictReader(io.StringIO(summary)))
    assert sorted(r["label"] for r in table) == sorted(LABELS)
    [failed] = [r for r in table if r["status"] != "ok"]
    assert failed["label"] == LABELS[0] and failed["status"] == "failed: profile" and failed["dyn_train_ms"] == ""
    ratios = [float(r["train_ratio"]) for r in table if r["train_ratio"]]
    assert ratios == sorted(ratios, reverse=True) and np.isfinite(ratios).all()
    assert old_id != new_id
