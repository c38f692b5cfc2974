"""The GPU run's checks (per-op rows vs busy time, profiler overhead, ratios vs the reference)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from report_inputs import LABELS, write_results

from embprof.report.checks import against_reference, checks_markdown, consistency, overhead
from embprof.results.busy import RANGE_RULE
from embprof.results.records import read_results
from embprof.results.run import Run


def _with_walls(root: Path, label: str, walls: dict[str, float], rule: str | None = None) -> None:
    path = root / "opcalls" / f"opcalls__{label}.busy.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "range_ms_per_iter": walls} | ({"range_rule": rule} if rule else {})))


def test_consistency_flags_rows_that_do_not_add_up(tmp_path: Path) -> None:
    root = write_results(tmp_path, failed=None)  # busy = 0.97 x the summed rows
    table = consistency(Run.from_folder(root))
    assert len(table) == 2 * 5 + 1  # dyn + trc, but adam (one config) has no trc
    assert table["ops_over_busy"].round(6).eq(round(1 / 0.97, 6)).all()
    assert table["within_5pct"].all()
    busy = root / "opcalls" / f"opcalls__{LABELS[0]}.busy.json"
    busy.write_text(json.dumps({"busy_ms_per_iter": {"dyn": 1.0, "trc": 0.55}, "time_source": "gpu-kernels"}))
    table = consistency(Run.from_folder(root))
    first = table[table["label"] == LABELS[0]].set_index("backend")
    assert not first.loc["dyn", "within_5pct"]  # the rows add up to 1.68 ms
    assert first.loc["trc", "within_5pct"]  # 0.55 ms of rows


def test_overhead_compares_profiled_wall_time_with_the_timing_run(tmp_path: Path) -> None:
    root = write_results(tmp_path, failed=None, walls=False)
    records = read_results(root / "benchmark_results.json")
    assert overhead(Run.from_folder(root)).empty  # sidecars without wall times: nothing to compare
    _with_walls(root, LABELS[0], {"dyn": 2.5, "trc": 1.12})
    table = overhead(Run.from_folder(root)).set_index("backend")
    dyn_train = records[0]["dyn_train_ms"]
    assert table.loc["dyn", "overhead_pct"] == pytest.approx(100 * (2.5 / dyn_train - 1))
    assert table.loc["trc", "timed_train_ms"] == records[0]["trc_train_ms"]
    assert set(table["measured_as"]) == {"host range only"}  # a sidecar from before the until-done rule
    _with_walls(root, LABELS[0], {"dyn": 2.5, "trc": 1.12}, rule=RANGE_RULE)
    assert set(overhead(Run.from_folder(root))["measured_as"]) == {"range + its device work"}


def test_reference_ratios_where_published(tmp_path: Path) -> None:
    root = write_results(tmp_path, failed=None)
    table = against_reference(read_results(root / "benchmark_results.json")).set_index("label")
    assert table.loc[LABELS[0], "reference_h100"] == 2.0  # sgd, all rows in GPU memory
    assert table.loc[LABELS[2], "reference_h100"] == 2.6  # sgd, caching, cfr 1.0
    assert pd.isna(table.loc[LABELS[1], "reference_h100"])  # cfr 0.5: nothing published
    assert LABELS[4] not in table.index  # adam on the CPU: no baseline
    row = table.loc[LABELS[0]]
    assert row["dyn_over_trc"] == pytest.approx(row["dyn_train_ms"] / row["trc_train_ms"])


def test_markdown_and_cli(tmp_path: Path) -> None:
    root = write_results(tmp_path, failed=None)
    text = checks_markdown(Run.from_folder(root))
    assert "11 of 11 within 5%" in text and "| reference_h100 |" in text
    out = tmp_path / "CHECKS.md"
    done = subprocess.run([sys.executable, "-m", "embprof", "checks", str(root), "--out", str(out)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and out.read_text() == text
    bad = subprocess.run([sys.executable, "-m", "embprof", "checks", str(tmp_path / "nowhere")],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("embprof checks: error:")


def test_a_failed_configs_per_op_files_are_not_checked(tmp_path: Path) -> None:
    """Its profile failed this time: the per-op CSV and sidecar are an earlier run's (issue 17)."""
    root = write_results(tmp_path, failed=None)
    status = root / "status" / f"{LABELS[0]}.json"
    status.write_text(json.dumps(json.loads(status.read_text()) | {"ok": False, "failed_step": "profile"}))
    _with_walls(root, LABELS[0], {"dyn": 2.5, "trc": 1.12})
    text = checks_markdown(Run.from_folder(root))
    assert "9 of 9 within 5%" in text  # the other configs' rows, dyn and trc (adam: dyn only)
    assert LABELS[0] not in text.split("## DynamicEmb against TBE")[0]
