"""embprof.results.Run: a run read once, what every view takes; which configs are shown is decided
in one place, and a config's files are read only when asked for."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from report_inputs import LABELS, iteration_ns, legacy_csv, opcalls_frame, write_results

from embprof.cli import main
from embprof.compare import compare_runs
from embprof.errors import ContractError
from embprof.report.checks import consistency
from embprof.results import Run
from embprof.results.bandwidth import write_bandwidth
from embprof.results.paths import ResultsPaths
from embprof.results.samples import read_samples

FAILED = LABELS[3]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A results folder of six configs, one failed, whose per-op files an earlier run left behind."""
    root = write_results(tmp_path / "results", failed=FAILED)
    paths = ResultsPaths(root)
    stale = opcalls_frame(9.0)
    stale.to_csv(paths.opcalls(FAILED), index=False)
    paths.busy(FAILED).write_text(json.dumps({"busy_ms_per_iter": {"dyn": 9.0}, "time_source": "gpu-kernels"}))
    for label in LABELS:
        write_bandwidth(stale.assign(bytes_per_iter=1e6, achieved_gbps=1.0, pct_of_peak=1.0, formula="f"),
                        paths.bandwidth(label))
    return root


def test_a_folder_reads_as_one_run(folder: Path) -> None:
    run = Run.from_folder(folder)
    shown = [label for label in LABELS if label != FAILED]
    assert run.labels == sorted(LABELS) and run.shown == sorted(shown)
    assert run.failed_steps == {FAILED: "profile"}
    assert list(run.opcalls) == list(run.samples) == list(run.busy) == list(run.bandwidth) == run.shown
    assert [r["label"] for r in run.records] == sorted(shown) and run.by_label[shown[0]]["status"] == "ok"
    assert run.configs[FAILED].endswith(f"[{FAILED}]") and run.environment["device"] == "cpu"
    assert run.peak is None and run.provenance["git_commit"] is None
    label = shown[0]
    pd.testing.assert_frame_equal(run.samples[label], read_samples(ResultsPaths(folder).samples(label)))
    assert run.samples[label].groupby(["backend", "phase", "parent_stages", "op"], sort=False)["ms"].mean().to_numpy() \
        == pytest.approx(run.opcalls[label]["avg_ms_per_iter"].to_numpy(), rel=1e-6)


def test_every_view_shows_the_configs_the_run_shows(folder: Path, capsys) -> None:
    """The report, the checks, the bandwidth chart, the database and the comparison take the run's
    configs, never their own set of labels (a failed config's stale files in none of them)."""
    run = Run.from_folder(folder)
    assert sorted(set(consistency(run)["label"])) == run.shown
    assert compare_runs(run, Run.from_folder(folder)).ops["label"].unique().tolist() == run.shown
    assert main(["db", "write", "--results-dir", str(folder)]) == 0
    capsys.readouterr()
    with sqlite3.connect(folder / "embprof.sqlite") as con:
        for table in ("opcalls", "op_samples", "busy"):
            assert [r[0] for r in con.execute(f"SELECT DISTINCT label FROM {table} ORDER BY label")] == run.shown
    from embprof.report.build import report_page

    page = report_page(run)
    assert [s.label for s in page.sections if s.legends] == run.shown
    assert sorted(name.removeprefix("sunburst__").removesuffix(".png")
                  for name in page.figures if name.startswith("sunburst__")) == run.shown


def test_a_configs_files_are_read_when_asked_for(folder: Path) -> None:
    """A broken per-op file of one config breaks only what reads that config."""
    paths = ResultsPaths(folder)
    broken, fine = LABELS[0], LABELS[1]
    paths.opcalls(broken).write_text("backend\n")
    paths.samples(broken).write_text("backend,phase\n")
    run = Run.from_folder(folder)
    assert broken in run.opcalls and len(run.opcalls[fine]) and len(run.samples[fine])
    with pytest.raises(ContractError, match="missing column"):
        _ = run.opcalls[broken]
    with pytest.raises(ContractError, match="missing column"):
        _ = run.samples[broken]
    with pytest.raises(KeyError):
        _ = run.opcalls[FAILED]


def test_older_folders_read_as_new_ones(folder: Path) -> None:
    """Per-op CSVs with ms_by_iter (issues 20 to 32) give their samples from it; a folder without
    statuses (written before them) shows every config; one without records is refused by what needs them."""
    paths = ResultsPaths(folder)
    label = LABELS[0]
    frame = opcalls_frame(1.0)
    legacy_csv(frame).to_csv(paths.opcalls(label), index=False)
    paths.samples(label).unlink()
    new = Run.from_folder(folder)
    assert new.samples[label]["ms"].to_numpy() == pytest.approx((iteration_ns(frame) / 1e6).ravel(), rel=1e-5)
    for status in paths.status_dir.iterdir():
        status.unlink()
    paths.status_dir.rmdir()
    assert Run.from_folder(folder).shown == sorted(LABELS)
    paths.benchmark_results.unlink()
    run = Run.from_folder(folder)
    assert run.labels == sorted(LABELS)  # from configs.tsv
    with pytest.raises(ContractError, match="benchmark_results.json: no such file"):
        _ = run.records
    with pytest.raises(ContractError, match="no such results folder"):
        Run.from_folder(folder / "nowhere")


def test_one_configs_files_make_a_run(folder: Path) -> None:
    """What the sunburst step draws: a per-op CSV and the files beside it, in any folder."""
    csv = ResultsPaths(folder).opcalls(LABELS[1])
    run = Run.from_opcalls(csv, LABELS[1])
    assert run.labels == run.shown == [LABELS[1]] and run.records == []
    assert list(run.opcalls) == list(run.busy) == [LABELS[1]] and len(run.samples[LABELS[1]])


def test_a_run_made_in_memory_holds_what_it_was_given() -> None:
    frame = opcalls_frame()
    run = Run("mine", [], {LABELS[0]: frame})
    assert run.paths is None and run.shown == [] and run.samples[LABELS[0]].empty
    assert run.opcalls[LABELS[0]] is frame and run.bandwidth is None and run.busy == {}
