"""``embprof diff``: two results folders in, a table out, exit 1 when the gate fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from report_inputs import LABELS, write_results
from test_compare import scaled

from embprof.cli import main


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("diff")
    old = write_results(root / "old", failed=None)
    new = Path(shutil.copytree(old, root / "new"))
    path = new / "benchmark_results.json"
    records = json.loads(path.read_text())
    records[1] = scaled(records[1], 2.0)  # one config twice as slow, every metric
    path.write_text(json.dumps(records))
    return old, new


def test_same_folder_passes_the_gate(folders, capsys):
    old, _ = folders
    assert main(["diff", str(old), str(old), "--gate", "5"]) == 0
    out = capsys.readouterr().out
    assert "no change: 22 config metrics within noise" in out
    assert "gate 5%: passed" in out


def test_a_slower_config_fails_the_gate_and_is_named(folders, capsys):
    old, new = folders
    assert main(["diff", str(old), str(new), "--gate", "50"]) == 1
    out = capsys.readouterr().out
    failed = next(line for line in out.splitlines() if line.startswith("gate 50%: FAILED"))
    assert failed.endswith(LABELS[1]) and "4 config metric(s)" in failed
    assert main(["diff", str(old), str(new), "--gate", "150"]) == 0  # 100% slower passes a 150% gate
    assert main(["diff", str(new), str(old), "--gate", "0"]) == 0  # faster never fails it
    capsys.readouterr()


def test_markdown_for_a_pull_request(folders, capsys):
    old, new = folders
    assert main(["diff", str(old), str(new), "--format", "markdown", "--ops", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"### embprof diff: `{old}` → `{new}`")
    assert "**4 changes (4 slower), 18 config metrics within noise**" in out
    header = next(line for line in out.splitlines() if line.startswith("| config | metric"))
    assert header.count("|") == 12 and header.endswith("| p | verdict |")  # 11 columns


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere"], "nowhere: no such results folder"),
        (["--gate", "-1"], "--gate must be a percentage >= 0"),
    ],
)
def test_bad_input_is_one_line(folders, capsys, args, message):
    old, _ = folders
    argv = ["diff", str(old), *(args if args[0] == "nowhere" else [str(old), *args])]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"embprof diff: error: {message}" or err.startswith(f"embprof diff: error: {message}")
    assert "\n" not in err
