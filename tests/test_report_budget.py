"""The report's step budget, dyn against TBE per phase, short names and links, on real files: the
H200 example's committed per-op CSVs, sidecars and records, and a results folder of the test inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from report_inputs import LABELS, write_results

from embprof.pages.cells import shorten_middle
from embprof.pages.html import breakable
from embprof.report.budget import budget_figure, budget_view, step_budget
from embprof.report.links import config_links
from embprof.report.names import distinct_names
from embprof.report.phases import paired_groups, phase_figure, phase_times, work_groups
from embprof.results.busy import read_busy
from embprof.results.opcalls import read_opcalls
from embprof.results.paths import ResultsPaths
from embprof.results.records import read_results

H200 = ResultsPaths(Path(__file__).resolve().parents[1] / "examples" / "h200")
CFR1 = "T10_totalB1048570_D128_adam_caching_pool=none_cap=1638K_cfr=1.0"
CFR08 = "T10_totalB1048570_D128_adam_caching_pool=none_cap=1638K_cfr=0.8"


def _h200(labels: list[str]) -> tuple[dict, dict]:
    records = {r["label"]: r for r in read_results(H200.benchmark_results)}
    return records, {label: read_busy(H200.busy(label)) for label in labels}


def test_the_h200_budget_puts_its_finding_in_numbers() -> None:
    """Caching adam cfr 1.0: the timed step, the profiled one and the GPU's busy share of it, each
    from its file (the record, the sidecar); the rest split into idle within the range and host."""
    records, busy = _h200([CFR1])
    table = step_budget([CFR1], records, busy, {CFR1: "adam caching cfr=1"}).set_index("backend")
    dyn = table.loc["dyn"]
    sidecar = busy[CFR1]
    assert dyn["timed_ms"] == pytest.approx(records[CFR1]["dyn_train_ms"])
    assert dyn["busy_ms"] == pytest.approx(sidecar.ms_per_iter["dyn"])
    assert dyn["profiled_ms"] == pytest.approx(sidecar.range_ms_per_iter["dyn"])
    assert dyn["not_busy_ms"] == pytest.approx(dyn["profiled_ms"] - dyn["busy_ms"])
    assert dyn["busy_pct"] == pytest.approx(100 * dyn["busy_ms"] / dyn["profiled_ms"])
    assert dyn["overhead_pct"] == pytest.approx(100 * (dyn["profiled_ms"] / dyn["timed_ms"] - 1))
    assert dyn["idle_ms"] == pytest.approx(sidecar.idle_ms_per_iter["dyn"])
    assert dyn["busy_ms"] + dyn["idle_ms"] + dyn["host_ms"] == pytest.approx(dyn["profiled_ms"])
    checks = (Path(__file__).resolve().parents[1] / "examples/h200/CHECKS.md").read_text()
    assert f"| {CFR1} | dyn | {dyn['profiled_ms']:.2f} | {dyn['timed_ms']:.2f} | {dyn['overhead_pct']:.2f} |" in checks
    titles = [c.title for c in budget_view(table.reset_index(), cpu=False)]
    assert "host only ms" in titles and "GPU idle in range ms" in titles
    fig = budget_figure(table.reset_index())
    assert [t.name for t in fig.data] == ["GPU busy", "idle within the range", "host only", "timed step (unprofiled)"]


def test_an_idle_split_gives_host_time_and_an_old_range_gives_no_profiled_step(tmp_path: Path) -> None:
    root = write_results(tmp_path / "results", failed=None)
    paths = ResultsPaths(root)
    path = paths.busy(LABELS[0])
    data = json.loads(path.read_text())
    busy_dyn, range_dyn = data["busy_ms_per_iter"]["dyn"], data["range_ms_per_iter"]["dyn"]
    data["idle_ms_per_iter"] = {"dyn": 0.25 * (range_dyn - busy_dyn), "trc": 0.0}
    path.write_text(json.dumps(data))
    old = paths.busy(LABELS[1])
    old.write_text(json.dumps({k: v for k, v in json.loads(old.read_text()).items() if k != "range_rule"}))
    records = {r["label"]: r for r in read_results(paths.benchmark_results)}
    table = step_budget(LABELS[:2], records, {lab: read_busy(paths.busy(lab)) for lab in LABELS[:2]}, {})
    split = table[(table["label"] == LABELS[0]) & (table["backend"] == "dyn")].iloc[0]
    assert split["host_ms"] == pytest.approx(0.75 * (range_dyn - busy_dyn))
    assert split["busy_ms"] + split["idle_ms"] + split["host_ms"] == pytest.approx(split["profiled_ms"])
    assert table[table["label"] == LABELS[1]]["profiled_ms"].isna().all()  # host range only: no step time
    titles = [c.title for c in budget_view(table, cpu=True)]
    assert {"CPU busy ms", "CPU idle in range ms", "host only ms", "not busy ms"} <= set(titles)


def test_dyn_against_tbe_per_phase_from_the_h200_per_op_csv() -> None:
    frame = read_opcalls(H200.opcalls(CFR08))
    records, busy = _h200([CFR08])
    groups = work_groups(frame)
    times = phase_times(groups, records[CFR08]).set_index("phase")
    # device ms of a phase: the per-op rows summed; train: both phases, as the sidecar's busy time
    for backend in ("dyn", "trc"):
        rows = frame[frame["backend"] == backend]
        assert times.loc["train", f"{backend}_gpu_ms"] == pytest.approx(busy[CFR08].ms_per_iter[backend], rel=1e-6)
        for phase in ("forward", "backward"):
            expected = rows.loc[rows["phase"] == phase, "avg_ms_per_iter"].sum()
            assert times.loc[phase, f"{backend}_gpu_ms"] == pytest.approx(expected)
    assert times.loc["forward", "dyn_wall_ms"] == records[CFR08]["dyn_forward_ms"]
    assert times.loc["eval", "trc_wall_ms"] == records[CFR08]["trc_eval_ms"]
    assert math.isnan(times.loc["eval", "dyn_gpu_ms"])  # profiles run train steps only
    assert times.loc["backward", "wall_ratio"] == pytest.approx(
        records[CFR08]["dyn_backward_ms"] / records[CFR08]["trc_backward_ms"])
    # TBE's kernels by category (its cache kernels: 'embedding cache'); dyn's ops by name
    trc = groups[groups["backend"] == "trc"]
    assert set(trc["group"]) == {f"[{c}]" for c in frame.loc[frame["backend"] == "trc", "fallback_category"]}
    assert "[embedding cache]" in set(trc["group"])
    dyn_ops = set(frame.loc[(frame["backend"] == "dyn") & frame["fallback_category"].eq(""), "op"])
    assert dyn_ops <= set(groups.loc[groups["backend"] == "dyn", "group"])
    paired = paired_groups(groups)
    forward = paired[paired["phase"] == "forward"]
    assert forward["dyn_ms"].iloc[0] == forward["dyn_ms"].max()  # each side costliest first
    assert forward["trc_ms"].iloc[0] == forward["trc_ms"].max()
    fig = phase_figure(groups, "t")
    assert list(fig.layout.yaxis.categoryarray) == ["forward · dyn", "forward · trc", "backward · dyn", "backward · trc"]
    memory = next(t for t in fig.data if t.name == "[memory]")
    assert {"forward · trc", "backward · trc"} <= set(memory.y)  # one colour per group, on both sides


def test_tbes_cache_kernels_have_a_category_of_their_own() -> None:
    from embprof.trace.categories import load_categories

    categories = load_categories()
    names = ["lru_cache_insert_kernel", "lxu_cache_lookup_kernel", "linearize_cache_indices_kernel",
             "split_embedding_nobag_codegen_forward_unweighted_kernel"]
    assert [categories.of(n) for n in names] == ["embedding cache"] * 3 + ["embedding"]


def test_names_set_configs_apart_and_long_names_are_cut_in_the_middle() -> None:
    labels = [CFR08, CFR1, "T10_totalB1048570_D128_sgd_gpu_pool=none_cap=1638K", "h200_trace"]
    names = distinct_names(labels)
    assert names == {CFR08: "adam caching cfr=0.8", CFR1: "adam caching cfr=1",
                     labels[2]: "sgd gpu", "h200_trace": "h200_trace"}
    assert distinct_names([CFR1]) == {CFR1: CFR1}  # nothing to set it apart from
    kernel = "split_embedding_nobag_backward_codegen_adam_unweighted_kernel_warp_per_row_1"
    short = shorten_middle(kernel, 38)
    assert len(short) == 38 and short.startswith("split_embedding_nob") and short.endswith("warp_per_row_1")
    assert shorten_middle("memset", 38) == "memset"
    assert str(breakable("DeviceScan_<x>")) == "Device<wbr>Scan_<wbr>&lt;x&gt;"


def test_links_name_only_the_files_a_config_has(tmp_path: Path) -> None:
    root = write_results(tmp_path / "results")
    paths = ResultsPaths(root)
    (root / "logs" / "profile").mkdir(parents=True)
    paths.log("profile", LABELS[0]).write_text("ok\n")
    links = {link.text: link.href for link in config_links(paths, LABELS[0], root / "report")}
    assert links["per-op CSV"] == f"../opcalls/opcalls__{LABELS[0]}.csv".replace("=", "%3D")
    assert links["profile log"] == f"../logs/profile/{LABELS[0]}.log".replace("=", "%3D")
    assert "trace (nsys)" not in links and "bandwidth CSV" not in links  # not in this folder
    stale = {link.text for link in config_links(paths, LABELS[0], root / "report", with_per_op=False)}
    assert "per-op CSV" not in stale and "profile log" in stale


def test_top_kernels_from_the_sidecar_are_shown_and_bad_ones_refused(tmp_path: Path) -> None:
    from report_inputs import report_inputs

    from embprof.errors import ContractError
    from embprof.report.budget import top_kernels
    from embprof.report.build import build_report

    root = write_results(tmp_path / "results")
    path = ResultsPaths(root).busy(LABELS[0])
    data = json.loads(path.read_text())
    kernel = "split_embedding_nobag_backward_codegen_adam_unweighted_kernel_warp_per_row_1"
    rows = [{"kernel": kernel, "ms_per_iter": 0.35, "calls_per_iter": 1.0, "mean_us": 350.0}]
    path.write_text(json.dumps(data | {"top_kernels": {"trc": rows}}))
    table = top_kernels(read_busy(path))["trc"]
    assert table.loc[0, "pct_of_busy"] == pytest.approx(100 * 0.35 / data["busy_ms_per_iter"]["trc"])
    html = build_report(report_inputs(root)).read_text()
    assert html.count("<h4>Top kernels</h4>") == 1 and f'title="{kernel}"' in html
    path.write_text(json.dumps(data | {"top_kernels": {"trc": [rows[0] | {"mean_us": -1}]}}))
    with pytest.raises(ContractError, match="top_kernels"):
        read_busy(path)
