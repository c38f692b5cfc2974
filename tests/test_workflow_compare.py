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

from embprof.compare import CHANGE, compare_runs
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


def test_two_runs_of_the_same_code_show_no_change(two_runs: tuple[Path, Path]) -> None:
    first, second = two_runs
    for record in read_results(second / "benchmark_results.json"):
        assert record["repeats"] == 10 and record["timer"] == "cpu_time"  # the smoke preset's
        assert len(record["timings"]["dyn_train_ms"]["repeats"]) == 10
    done = diff(first, second, "--gate", "10")
    assert not [line for line in done.stdout.splitlines() if " differs: " in line]
    report = (second / "report" / "index.html").read_text()
    changes = report[report.index('<section id="changes">'):]
    changes = changes[: changes.index("</section>")]
    assert f"Changes against {first}" in changes
    assert f"## Changes against `{first}`" in (second / "report" / "summary.md").read_text()
    # The shared machine can drift between the runs, and then TBE (the same code in both) moves too: a
    # change is allowed only in a config whose TBE changed, and the diff must say that the machine did.
    configs = compare_runs(Run.from_folder(first), Run.from_folder(second)).configs
    changed = configs[configs["verdict"] == CHANGE]
    machine = set(changed.loc[changed["metric"].str.startswith("trc_"), "label"])
    assert set(changed["label"]) <= machine, done.stdout
    if machine:
        drift = next(line for line in done.stdout.splitlines() if line.startswith("warning: TBE changed"))
        assert all(label in drift for label in machine), done.stdout
        return
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no change: " in done.stdout.splitlines()[1], done.stdout
    assert "gate 10%: passed" in done.stdout
    assert "no change: " in changes and ">slower<" not in changes and ">faster<" not in changes


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
    assert "no config metric timed in both runs (8 new, 40 removed)" in done.stdout  # seed vs smoke
