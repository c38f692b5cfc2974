"""``embprof diff``: two results folders in, a table out, exit 1 when the gate fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from report_inputs import LABELS, write_results
from test_compare import scaled
from test_workflow_compare import check_same_code

from embprof.cli import main
from embprof.results.timings import timing_entry


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


def _with_records(tmp_path: Path, old: Path, name: str, change) -> Path:
    """A copy of ``old`` whose records ``change`` rewrites (as a run that went wrong leaves them)."""
    new = Path(shutil.copytree(old, tmp_path / name))
    path = new / "benchmark_results.json"
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return new


def test_the_gate_fails_naming_configs_timed_before_and_not_now(folders, tmp_path, capsys):
    """Issue 34, case 3: a config that crashed now, one whose backend is null now, or a run that
    timed nothing, fails the gate; before, they were merely 'removed' and the gate passed."""
    old, _ = folders
    crashed = _with_records(tmp_path, old, "crashed", lambda records: records[1:])
    assert main(["diff", str(old), str(crashed), "--gate", "5"]) == 1
    out = capsys.readouterr().out
    failed = next(line for line in out.splitlines() if line.startswith("gate 5%: FAILED"))
    assert failed == f"gate 5%: FAILED: 4 config metric(s) timed before have no time now: {LABELS[0]}"
    assert "passed" not in out and "no record" in out

    def untimed(records):
        records[0]["status"] = "failed"
        for metric in ("trc_train_ms", "trc_eval_ms"):
            records[1][metric] = records[1]["timings"][metric] = None
        return records

    assert main(["diff", str(old), str(_with_records(tmp_path, old, "untimed", untimed)), "--gate", "5"]) == 1
    out = capsys.readouterr().out
    assert f"6 config metric(s) timed before have no time now: {', '.join(sorted(LABELS[:2]))}" in out
    assert "status failed" in out and "no number" in out

    nothing = _with_records(tmp_path, old, "nothing", lambda records: [])
    assert main(["diff", str(old), str(nothing), "--gate", "5"]) == 1
    assert f"gate 5%: FAILED: {nothing} timed no config: nothing to pass" in capsys.readouterr().out
    assert main(["diff", str(nothing), str(nothing), "--gate", "5"]) == 1  # nothing timed, nothing passed
    capsys.readouterr()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda r: r | {"dyn_train_ms": -r["dyn_train_ms"]}, "dyn_train_ms is -"),
        (lambda r: r | {"timings": r["timings"] | {"dyn_eval_ms": {**r["timings"]["dyn_eval_ms"], "repeats": ["0.8"]}}},
         "timings['dyn_eval_ms'] repeat 0 is '0.8', not a time in ms (a number >= 0)"),
        (lambda r: r | {"timings": r["timings"] | {"trc_eval_ms": {**r["timings"]["trc_eval_ms"], "repeats": [-0.3]}}},
         "timings['trc_eval_ms'] repeat 0 is -0.3, not a time in ms (a number >= 0)"),
    ],
)
def test_a_time_that_is_a_string_or_negative_is_one_line(folders, tmp_path, capsys, change, problem):
    """Issue 34, cases 3 and 6: a negative time read as a speed-up, a string repeat gave a traceback."""
    old, _ = folders
    bad = _with_records(tmp_path, old, "bad", lambda records: [change(records[0]), *records[1:]])
    assert main(["diff", str(old), str(bad), "--gate", "5"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"embprof diff: error: {bad / 'benchmark_results.json'}: record 0: {problem}")
    assert "\n" not in err


def test_two_runs_of_the_same_code_on_a_busy_machine_compare_alike(folders, tmp_path):
    """Issue 34, case 9: the end-to-end check of two runs of the same code held on a busy machine,
    where TBE of one config ran 45% faster in the second run and dyn of another 30% slower."""
    old, _ = folders

    def busy(records):
        for record, metrics, factor in ((records[0], ("trc_train_ms", "trc_eval_ms"), 0.55),
                                        (records[2], ("dyn_train_ms",), 1.3)):
            for metric in metrics:
                record["timings"][metric] = timing_entry([factor * v for v in record["timings"][metric]["repeats"]])
                record[metric] = record["timings"][metric]["median"]
        return records

    check_same_code(old, _with_records(tmp_path, old, "busy", busy))
