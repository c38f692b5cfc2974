"""Comparisons end to end: two real runs of the tiny config, one after the other, compared the
two ways a user compares them (the report's ``compare_to`` and ``embprof diff``); then a copy of
the first doctored to make one config twice as slow, and a results folder of another machine."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from test_workflow_e2e import GOOD_LABELS, REPO, TINY, copy_workflow, snakemake, write_config

from embprof.compare import CHANGE, NOISE, compare_runs
from embprof.results.records import read_results, write_results
from embprof.results.run import Run
from embprof.results.timings import TIMING_METRICS, timing_entry

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
H200 = REPO / "examples" / "h200"  # a real run on an NVIDIA H200


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    first = copy_workflow(tmp_path_factory.mktemp("first"))
    done = snakemake(first, "--cores", "2", "report", "--configfile", str(TINY))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    second = copy_workflow(tmp_path_factory.mktemp("second"))
    config = write_config(second / "compare.yaml", compare_to=str(first / "results"))
    done = snakemake(second, "--cores", "2", "report", "--configfile", str(config))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return first / "results", second / "results"


def diff(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "embprof", "diff", *map(str, args)],
        capture_output=True, text=True, timeout=300, check=False,
    )


def check_same_code(first: Path, second: Path) -> None:
    """What two runs of the same code show whatever the machine did between them: no fact of the
    environment differs, every config metric is timed in both, and the diff (its tally, its warning
    about TBE, a gate no drift reaches) tells what the comparison found. Which metrics changed is
    the machine's to say: a busy 2-core CI machine moved TBE by -45% in one smoke config (issue 34,
    case 9), so this never asks for "no change"."""
    comparison = compare_runs(Run.from_folder(first), Run.from_folder(second))
    assert not [w for w in comparison.warnings if " differs: " in w and not w.startswith("TBE changed")]
    assert set(comparison.configs["verdict"]) <= {CHANGE, NOISE}, comparison.configs
    done = diff(first, second, "--gate", "1000")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1] == comparison.tally()
    assert "gate 1000%: passed" in done.stdout
    configs = comparison.configs
    changed = configs[configs["verdict"] == CHANGE]
    machine = set(changed.loc[changed["metric"].str.startswith("trc_"), "label"])
    drift = [line for line in done.stdout.splitlines() if line.startswith("warning: TBE changed")]
    assert bool(drift) == bool(machine) and all(label in drift[0] for label in machine), done.stdout
    # A run against itself is the same samples: no change, and the tightest gate passes.
    itself = diff(first, first, "--gate", "0")
    assert itself.returncode == 0 and "no change: " in itself.stdout.splitlines()[1], itself.stdout


def test_two_runs_of_the_same_code_compare_alike_however_busy_the_machine(two_runs: tuple[Path, Path]) -> None:
    first, second = two_runs
    for record in read_results(second / "benchmark_results.json"):
        assert record["repeats"] == 10 and record["timer"] == "cpu_time"  # the smoke preset's
        assert len(record["timings"]["dyn_train_ms"]["repeats"]) == 10
    check_same_code(first, second)
    report = (second / "report" / "index.html").read_text()
    changes = report[report.index('<section id="changes">'):]
    changes = changes[: changes.index("</section>")]
    assert f"Changes against {first}" in changes
    assert compare_runs(Run.from_folder(first), Run.from_folder(second)).tally() in changes
    assert f"## Changes against `{first}`" in (second / "report" / "summary.md").read_text()


def test_a_folder_doctored_twice_as_slow_fails_the_gate_and_names_the_config(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    # The first run against a copy of itself, so that only the doctoring differs: against the
    # second run, the shared machine's drift between the runs (2.5x on one CI run) could
    # outweigh the doubling.
    first, _ = two_runs
    doctored = Path(shutil.copytree(first, tmp_path / "doctored"))
    records = read_results(doctored / "benchmark_results.json")
    slow = next(r for r in records if r["label"] == GOOD_LABELS[1])
    for metric in TIMING_METRICS:
        if slow["timings"][metric] is not None:
            slow["timings"][metric] = timing_entry([2 * v for v in slow["timings"][metric]["repeats"]])
            slow[metric] = slow["timings"][metric]["median"]
    write_results(doctored / "benchmark_results.json", records)
    done = diff(first, doctored, "--gate", "25")
    assert done.returncode == 1, done.stdout + done.stderr
    failed = next(line for line in done.stdout.splitlines() if line.startswith("gate 25%: FAILED"))
    assert failed.endswith(GOOD_LABELS[1]) and GOOD_LABELS[0] not in failed
    markdown = diff(first, doctored, "--gate", "25", "--format", "markdown")
    assert markdown.returncode == 1 and "| config | metric |" in markdown.stdout
    assert f"| {GOOD_LABELS[1]} | dyn_train_ms |" in markdown.stdout


def _warnings(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [line.removeprefix("warning: ") for line in done.stdout.splitlines() if line.startswith("warning: ")]


def test_a_folder_from_another_environment_warns(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    _, second = two_runs
    done = diff(H200, second)
    warnings = _warnings(done)
    assert f"device differs: cuda in {H200}, cpu in {second}" in warnings
    assert f"timer differs: cuda_events in {H200}, cpu_time in {second}" in warnings
    assert f"torch differs: 2.11.0 in {H200}, {version('torch')} in {second}" in warnings
    assert not any("has no provenance" in w for w in warnings)  # the example records where it ran
    # The same run as a folder written before records carried provenance.
    older = Path(shutil.copytree(H200, tmp_path / "before-provenance"))
    records = json.loads((older / "benchmark_results.json").read_text())
    (older / "benchmark_results.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "provenance"} for r in records]))
    assert any(w.startswith(f"{older} has no provenance") for w in _warnings(diff(older, second)))
    # seed vs smoke: the example's 10 configs × train and eval of dyn, trc and nv (60) removed, the smoke run's new
    assert "no config metric timed in both runs (8 new, 60 removed)" in done.stdout
