"""Achieved GB/s and % of peak per op: bytes from the table over the CSV's time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embprof.bandwidth.achieved import COLUMNS, achieved_bandwidth
from embprof.bandwidth.table import DEFAULT_TABLE, load_table
from embprof.errors import ContractError

TABLE = load_table()
ROW = 64 * 4
RECORD = {
    "label": "T1_totalB1000_D64_adam_gpu_pool=none_cap=1M",
    "avg_n_total": 1000.0,
    "avg_n_unique": 250.0,
    "embedding_dim": 64,
    "num_tables": 1,
    "batch_size": 1000,
    "optimizer_type": "adam",
    "pooling_mode": "none",
}
GATHER_BYTES = 250 * ROW + 1000 * 8 + 1000 * ROW
TBE_BACKWARD_BYTES = 1000 * ROW + 1000 * 8 + 2 * 250 * (ROW + 2 * ROW)


def _opcalls(rows: list[tuple[str, str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["backend", "phase", "parent_stages", "op", "avg_ms_per_iter"]
    )


def test_one_op_gbps_and_pct() -> None:
    frame, notes = achieved_bandwidth(
        _opcalls([("dyn", "forward", "DynamicEmbeddingFunction.forward", "gather_embedding", 0.5)]),
        RECORD,
        TABLE,
        peak_gbps=10.0,
    )
    assert list(frame.columns) == list(COLUMNS) and not notes
    row = frame.iloc[0]
    assert row["bytes_per_iter"] == GATHER_BYTES
    assert row["achieved_gbps"] == pytest.approx(GATHER_BYTES / 0.5e-3 / 1e9)
    assert row["pct_of_peak"] == pytest.approx(GATHER_BYTES / 0.5e-3 / 1e9 / 10.0 * 100)
    assert row["formula"].startswith("gather_embedding: ")


def test_ops_without_formula_stay_empty() -> None:
    frame, _ = achieved_bandwidth(
        _opcalls(
            [
                ("dyn", "forward", "prefetch", "cache_lookup", 0.2),
                ("trc", "backward", "", "memset", 0.1),
            ]
        ),
        RECORD,
        TABLE,
        peak_gbps=10.0,
    )
    assert frame[["bytes_per_iter", "achieved_gbps", "pct_of_peak"]].isna().all().all()
    assert (frame["formula"] == "").all()


def test_split_kernels_share_the_group_bandwidth() -> None:
    warp = "split_embedding_nobag_backward_codegen_adam_unweighted_kernel_warp_per_row_1"
    cta = "split_embedding_nobag_backward_codegen_adam_unweighted_kernel_cta_per_row_1"
    frame, _ = achieved_bandwidth(
        _opcalls([("trc", "backward", "", warp, 0.3), ("trc", "backward", "", cta, 0.1)]),
        RECORD,
        TABLE,
        None,
    )
    group_gbps = TBE_BACKWARD_BYTES / 0.4e-3 / 1e9
    np.testing.assert_allclose(frame["achieved_gbps"], [group_gbps, group_gbps])
    np.testing.assert_allclose(
        frame["bytes_per_iter"], [TBE_BACKWARD_BYTES * 0.75, TBE_BACKWARD_BYTES * 0.25]
    )
    assert frame["pct_of_peak"].isna().all()


def test_same_op_under_two_stages_counts_the_bytes_twice() -> None:
    frame, _ = achieved_bandwidth(
        _opcalls(
            [
                ("dyn", "forward", "dynamicemb_prefetch", "gather_embedding", 0.5),
                ("dyn", "forward", "DynamicEmbeddingFunction.forward", "gather_embedding", 0.25),
            ]
        ),
        RECORD,
        TABLE,
        None,
    )
    np.testing.assert_allclose(frame["bytes_per_iter"], [GATHER_BYTES, GATHER_BYTES])
    np.testing.assert_allclose(
        frame["achieved_gbps"], [GATHER_BYTES / 0.5e-3 / 1e9, GATHER_BYTES / 0.25e-3 / 1e9]
    )


def test_zero_time_has_bytes_but_no_rate() -> None:
    frame, _ = achieved_bandwidth(
        _opcalls([("dyn", "backward", "", "reduce_grads", 0.0)]), RECORD, TABLE, 5.0
    )
    assert frame["bytes_per_iter"].iloc[0] == 1000 * ROW + 1000 * 8 + 250 * ROW
    assert np.isnan(frame["achieved_gbps"].iloc[0]) and np.isnan(frame["pct_of_peak"].iloc[0])


def test_unknown_optimizer_blanks_only_the_update() -> None:
    frame, notes = achieved_bandwidth(
        _opcalls(
            [
                ("dyn", "forward", "", "gather_embedding", 0.5),
                ("dyn", "backward", "", "optimizer_update_fused", 0.5),
            ]
        ),
        RECORD | {"optimizer_type": "lamb"},
        TABLE,
        None,
    )
    assert frame["achieved_gbps"].notna().tolist() == [True, False]
    assert frame["formula"].iloc[1].startswith("optimizer_update: ")
    assert any(n.startswith("optimizer_update: no bytes, undefined") for n in notes)


def test_bad_csv_is_an_error() -> None:
    with pytest.raises(ContractError, match="avg_ms_per_iter"):
        achieved_bandwidth(
            pd.DataFrame({"backend": ["dyn"], "phase": ["forward"], "op": ["x"]}),
            RECORD,
            TABLE,
            None,
        )
    with pytest.raises(ContractError, match="not non-negative"):
        achieved_bandwidth(_opcalls([("dyn", "forward", "", "x", -1.0)]), RECORD, TABLE, None)


def test_no_record_keeps_formulas_but_no_bytes() -> None:
    frame, notes = achieved_bandwidth(
        _opcalls([("dyn", "forward", "", "gather_embedding", 0.5)]), None, TABLE, 10.0
    )
    assert frame["formula"].iloc[0].startswith("gather_embedding: ")
    assert frame[["bytes_per_iter", "achieved_gbps", "pct_of_peak"]].isna().all().all()
    assert notes == ["no benchmark record (its timing run failed?): no bytes for any op"]


def test_a_formula_that_divides_by_zero_gives_a_note_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "bandwidth.yaml"
    path.write_text(
        DEFAULT_TABLE.read_text().replace(
            "bytes: n_total * key_bytes + n_unique",
            "bytes: n_total / (n_unique - n_unique) + n_unique",
            1,
        )
    )
    frame, notes = achieved_bandwidth(
        _opcalls([("dyn", "forward", "", "segmented_unique", 0.5)]), RECORD, load_table(path), None
    )
    assert frame["bytes_per_iter"].isna().all()
    assert any(
        n.startswith("segmented_unique: no bytes,") and "division by zero" in n for n in notes
    )


def test_copies_and_memsets_take_their_bytes_from_the_trace_and_the_peak_of_their_kind() -> None:
    """Bytes counted by the breakdown (per-op CSV since issue 19), rated against the copy peak of
    their kind; several kinds in one row name no one peak; an older CSV has no such rows."""
    ops = _opcalls([
        ("dyn", "forward", "dynamicemb_prefetch/op:storage_find", "memcpy HtoD", 2.0),
        ("dyn", "forward", "dynamicemb_prefetch/op:storage_insert", "memcpy DtoH", 1.0),
        ("dyn", "forward", "dynamicemb_prefetch/op:storage_insert", "memset", 0.5),
        ("dyn", "forward", "DynamicEmbeddingFunction.forward", "gather_embedding", 0.5),
    ]).assign(copy_bytes_per_iter=[40e6, 10e6, 1e6, np.nan],
              memory_kinds=["pageable->device", "device->pageable;device->pinned", "device", ""])
    copies = {"pageable->device": 25.0, "pinned->device": 55.0}
    frame, _ = achieved_bandwidth(ops, RECORD, TABLE, 4000.0, copies)
    assert frame["bytes_per_iter"].iloc[0] == 40e6
    assert frame["achieved_gbps"].iloc[0] == pytest.approx(40e6 / 2.0 / 1e6)  # 20 GB/s
    assert frame["pct_of_peak"].iloc[0] == pytest.approx(20.0 / 25.0 * 100)
    assert "pageable->device copy peak" in frame["formula"].iloc[0]
    assert frame["achieved_gbps"].iloc[1] == pytest.approx(10.0) and np.isnan(frame["pct_of_peak"].iloc[1])
    assert frame["pct_of_peak"].iloc[2] == pytest.approx(2.0 / 4000.0 * 100)  # a memset against the device
    assert frame["bytes_per_iter"].iloc[3] == pytest.approx(GATHER_BYTES)  # formulas still rule kernels
    older, _ = achieved_bandwidth(ops.drop(columns=["copy_bytes_per_iter", "memory_kinds"]), RECORD, TABLE, 4000.0)
    assert older["bytes_per_iter"].iloc[:3].isna().all()
