"""The per-config sunburst: rings, values, letter codes, legend tables."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from report_inputs import opcalls_frame

from embprof.plots.sunburst import (
    assign_letter_codes,
    legend_table,
    letter_code,
    sunburst_figure,
    sunburst_nodes,
)
from embprof.results.busy import read_busy
from embprof.results.opcalls import COLUMNS, read_opcalls

REAL_TRACE = Path(__file__).parent / "data" / "nsys" / "h200_torch_nvtx_nsys2025.3.sqlite"


def test_letter_codes_count_like_spreadsheet_columns():
    assert [letter_code(i) for i in (0, 1, 25, 26, 27, 51, 52, 701, 702)] == [
        "A", "B", "Z", "AA", "AB", "AZ", "BA", "ZZ", "AAA",
    ]
    assert len({letter_code(i) for i in range(2000)}) == 2000
    with pytest.raises(ValueError):
        letter_code(-1)


def test_codes_rank_ops_by_time_and_ignore_row_order():
    frame = opcalls_frame()
    codes = assign_letter_codes(frame)
    shuffled = assign_letter_codes(frame.sample(frac=1.0, random_state=7))
    assert codes == shuffled
    assert codes["reduce_grads"] == "A"  # 0.52 ms, the costliest op of either backend
    assert codes["segmented_unique"] == "B"
    assert sorted(codes.values()) == [letter_code(i) for i in range(frame["op"].nunique())]
    tied = pd.DataFrame({"op": ["b", "a"], "avg_ms_per_iter": [1.0, 1.0]})
    assert assign_letter_codes(tied) == {"a": "A", "b": "B"}


def _children(nodes) -> dict[str, list[int]]:
    kids: dict[str, list[int]] = {}
    for i, parent in enumerate(nodes.parents):
        kids.setdefault(parent, []).append(i)
    return kids


def test_rings_go_backend_phase_stages_op_and_parents_sum_their_children():
    frame = opcalls_frame()
    nodes = sunburst_nodes(frame, assign_letter_codes(frame), "dyn")
    assert len(set(nodes.ids)) == len(nodes.ids)
    depth = {}
    for node_id, parent in zip(nodes.ids, nodes.parents, strict=True):
        depth[node_id] = 0 if parent == "" else depth[parent] + 1
    by_id = dict(zip(nodes.ids, range(len(nodes.ids)), strict=True))
    assert nodes.parents[by_id["dyn"]] == ""
    assert nodes.values[by_id["dyn"]] == pytest.approx(frame.loc[frame.backend == "dyn", "avg_ms_per_iter"].sum())
    # op under two stages sits on ring 4, op with no stage straight under its phase (ring 2)
    assert depth["dyn|phase:forward|stage:dynamicemb_prefetch|stage:cache_miss|op:storage_find"] == 4
    assert depth["dyn|phase:forward|op:aten::copy_"] == 2
    assert nodes.parents[by_id["dyn|phase:backward"]] == "dyn"
    for parent, kids in _children(nodes).items():
        if parent:
            assert nodes.values[by_id[parent]] == pytest.approx(math.fsum(nodes.values[k] for k in kids))
    leaves = [i for i, node_id in enumerate(nodes.ids) if "|op:" in node_id]
    assert len(leaves) == (frame.backend == "dyn").sum()
    assert {nodes.labels[i] for i in leaves} <= set(assign_letter_codes(frame).values())


def test_stage_and_op_of_one_name_stay_apart_and_duplicate_rows_add_up():
    rows = [
        ("dyn", "forward", "", "x", 1, 0.5, 0.5, 1, "k", "", float("nan"), "", 0.7),
        ("dyn", "forward", "x", "y", 1, 0.25, 0.25, 1, "memcpy HtoD", "memory", 100.0, "pinned->device",
         float("nan")),
        ("dyn", "forward", "x", "y", 1, 0.25, 0.25, 1, "memcpy HtoD", "memory", 50.0, "pageable->device",
         float("nan")),
    ]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    nodes = sunburst_nodes(frame, assign_letter_codes(frame), "dyn")
    values = dict(zip(nodes.ids, nodes.values, strict=True))
    assert values["dyn|phase:forward|op:x"] == 0.5
    assert values["dyn|phase:forward|stage:x"] == 0.5
    legend = legend_table(frame, assign_letter_codes(frame), "dyn").set_index("op")
    assert legend.loc["y", "copy_bytes_per_iter"] == 150.0  # what the copies moved adds up too
    assert legend.loc["y", "memory_kinds"] == "pageable->device;pinned->device"
    assert math.isnan(legend.loc["x", "copy_bytes_per_iter"])
    assert values["dyn|phase:forward|stage:x|op:y"] == 0.5
    assert values["dyn"] == 1.0


def test_figure_has_a_sunburst_per_backend_and_drops_trc_without_rows():
    frame = opcalls_frame()
    fig = sunburst_figure(frame, assign_letter_codes(frame), "t")
    assert [t.type for t in fig.data] == ["sunburst", "sunburst"]
    assert [t.name for t in fig.data] == ["dyn", "trc"]
    assert fig.data[0].branchvalues == "total"
    left, right = fig.data[0].domain.x, fig.data[1].domain.x
    assert left[1] <= right[0]

    only_dyn = opcalls_frame(with_trc=False)
    fig = sunburst_figure(only_dyn, assign_letter_codes(only_dyn), "t")
    assert [t.name for t in fig.data] == ["dyn"]

    empty = only_dyn.iloc[0:0]
    fig = sunburst_figure(empty, assign_letter_codes(empty), "t")
    assert len(fig.data) == 0
    assert "no kernels" in fig.layout.annotations[0].text


def test_legend_table_is_sorted_by_time_with_shares_of_the_iteration():
    frame = opcalls_frame()
    codes = assign_letter_codes(frame)
    table = legend_table(frame, codes, "dyn")
    assert list(table.columns) == ["code", "phase", "stage", "op", "calls_per_iter", "cpu_ms_per_iter",
                                   "copy_bytes_per_iter", "memory_kinds", "ms_per_iter", "pct_of_iter"]
    older = legend_table(frame.drop(columns=["copy_bytes_per_iter", "memory_kinds", "cpu_ms_per_iter"]), codes, "dyn")
    assert "memory_kinds" not in older.columns  # a per-op CSV from before issue 19 carries none
    assert table["ms_per_iter"].is_monotonic_decreasing
    assert table["pct_of_iter"].sum() == pytest.approx(100.0)
    assert table.iloc[0][["code", "op", "stage"]].tolist() == ["A", "reduce_grads", "DynamicEmbeddingFunction.backward"]
    assert (table["code"] == table["op"].map(codes)).all()


def test_real_breakdown_of_an_nsys_export_renders(tmp_path):
    """A CSV made by the breakdown from a real Nsight Systems export goes through unchanged."""
    from embprof.trace import run_breakdown, write_outputs

    (csv,) = write_outputs(run_breakdown([REAL_TRACE], "any"), tmp_path)
    frame = read_opcalls(csv)
    busy = read_busy(csv.with_name(csv.name.replace(".csv", ".busy.json")))
    assert busy is not None and not busy.cpu_leaf_ops
    codes = assign_letter_codes(frame)
    fig = sunburst_figure(frame, codes, "real")
    (trace,) = fig.data
    root = list(trace.parents).index("")
    assert trace.values[root] == pytest.approx(frame["avg_ms_per_iter"].sum())
    assert codes["op:matmul"] == "A"  # 3 x 0.34 ms of matmul beat unique's kernels
    assert legend_table(frame, codes, frame["backend"].iloc[0])["pct_of_iter"].sum() == pytest.approx(100.0)
