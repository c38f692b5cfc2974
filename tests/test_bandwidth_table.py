"""config/bandwidth.yaml: every formula against bytes counted by hand, and the checks on load.

The hand counts below are written out from the issue's bytes semantics
(fp32 rows, int64 ids and indices), not from the table's formulas:
a config of 2 tables x 500 samples, one id per sample (1000 ids), 300 of
them distinct, dim 128, so one row is 512 bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from embprof.bandwidth.table import DEFAULT_TABLE, load_table
from embprof.errors import ConfigError, ContractError

TABLE = load_table()
ROW = 128 * 4
RECORD = {
    "avg_n_total": 1000.0,
    "avg_n_unique": 300.0,
    "embedding_dim": 128,
    "num_tables": 2,
    "batch_size": 500,
    "optimizer_type": "sgd",
    "pooling_mode": "none",
}
# Optimizer state bytes per row: adam 2 values per element, adagrad 1 per element,
# rowwise adagrad 1 per row, sgd none.
STATE = {"sgd": 0, "adam": 2 * 128 * 4, "adagrad": 128 * 4, "rowwise_adagrad": 4}

# (rule, record changes, bytes counted by hand)
CASES = [
    # read 1000 ids, write 300 unique ids and 1000 inverse indices
    ("segmented_unique", {}, 1000 * 8 + 300 * 8 + 1000 * 8),
    # read 300 unique rows and 1000 inverse indices, write 1000 rows
    ("gather_embedding", {}, 300 * ROW + 1000 * 8 + 1000 * ROW),
    # pooled (sum), 3 ids per sample: 3000 ids, 1000 bags -> 1000 pooled rows out
    (
        "gather_embedding",
        {"avg_n_total": 3000.0, "pooling_mode": "sum"},
        300 * ROW + 3000 * 8 + 1000 * ROW,
    ),
    # read 1000 gradient rows and 1000 inverse indices, write 300 summed rows
    ("reduce_grads", {}, 1000 * ROW + 1000 * 8 + 300 * ROW),
    (
        "reduce_grads",
        {"avg_n_total": 3000.0, "pooling_mode": "mean"},
        1000 * ROW + 3000 * 8 + 300 * ROW,
    ),
    # per unique row: read its slot and summed gradient, read + write row and state
    *[
        ("optimizer_update", {"optimizer_type": opt}, 300 * (8 + ROW + 2 * (ROW + STATE[opt])))
        for opt in STATE
    ],
    (
        "optimizer_update",
        {"optimizer_type": "EXACT_ROWWISE_ADAGRAD"},
        300 * (8 + ROW + 2 * (ROW + 4)),
    ),
    (
        "optimizer_update",
        {"optimizer_type": "EmbOptimType.ADAM"},
        300 * (8 + ROW + 2 * (ROW + 1024)),
    ),
    # TBE forward: as the gather
    ("tbe_forward", {}, 300 * ROW + 1000 * 8 + 1000 * ROW),
    # TBE fused backward: read 1000 gradient rows and 1000 sorted indices, read + write
    # 300 rows with their state
    *[
        (
            "tbe_backward",
            {"optimizer_type": opt},
            1000 * ROW + 1000 * 8 + 2 * 300 * (ROW + STATE[opt]),
        )
        for opt in STATE
    ],
]


def _bytes(rule_name: str, changes: dict[str, object]) -> float:
    rule = next(r for r in TABLE.rules if r.name == rule_name)
    variables, notes = TABLE.variables_for(RECORD | changes)
    assert not notes
    return float(rule.bytes(variables))


@pytest.mark.parametrize(("rule", "changes", "expected"), CASES)
def test_formula_against_hand_count(rule: str, changes: dict[str, object], expected: int) -> None:
    assert _bytes(rule, changes) == expected


def test_every_rule_has_a_hand_counted_case() -> None:
    assert {r.name for r in TABLE.rules} == {case[0] for case in CASES}


def test_every_op_of_the_design_has_a_formula_or_a_reason() -> None:
    design = Path(__file__).resolve().parents[1] / "docs" / "DESIGN.md"
    listed = re.search(r"Op names are the reference system's: (.*?)\.\n", design.read_text(), re.S)
    assert listed is not None
    ops = set(re.findall(r"`(\w+)`", listed.group(1)))
    modelled = {op for rule in TABLE.rules for op in rule.ops}
    assert ops == modelled | set(TABLE.without_formula)
    assert not modelled & set(TABLE.without_formula)


TBE_FORWARD = [
    "split_embedding_codegen_forward_unweighted_kernel",  # Kineto fixture (A100), pooled
    "split_embedding_codegen_forward_weighted_kernel",
    "split_embedding_nobag_codegen_forward_unweighted_small_kernel",
    "split_embedding_codegen_forward_unweighted_v2_kernel",
    "split_embedding_nobag_codegen_forward_cpu",  # CPU operator (torch profiler)
    "fbgemm::split_embedding_codegen_forward_cpu",
]
TBE_BACKWARD = [
    "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1",  # Kineto fixture
    "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1",
    "split_embedding_nobag_backward_codegen_adam_unweighted_kernel_warp_per_row_1",
    "split_embedding_backward_codegen_sgd_unweighted_vbe_kernel_cta_per_row_1",
    "split_embedding_nobag_backward_codegen_sgd_cpu",
    "fbgemm::split_embedding_nobag_backward_codegen_rowwise_adagrad_cpu",
]
NEITHER = [
    "split_embedding_backward_codegen_rowwise_adagrad_unweighted_find_long_segments",
    "split_embedding_codegen_grad_indice_weights_kernel",
    "split_embedding_nobag_codegen_forward_unweighted_pt2_wrapper",
    "split_embedding_nobag_backward_codegen_sgd_unweighted_pt2_wrapper",
    "split_embedding_codegen_lookup_sgd_function_pt2",
    "DeviceRadixSortOnesweepKernel",
    "bounds_check_indices",
]


def _matching_rules(backend: str, phase: str, op: str) -> list[str]:
    rows = pd.DataFrame({"backend": [backend], "phase": [phase], "op": [op]})
    return [r.name for r in TABLE.rules if r.matches(rows)[0]]


@pytest.mark.parametrize("op", TBE_FORWARD)
def test_tbe_forward_kernels(op: str) -> None:
    assert _matching_rules("trc", "forward", op) == ["tbe_forward"]
    assert _matching_rules("trc", "backward", op) == []
    assert _matching_rules("dyn", "forward", op) == []


@pytest.mark.parametrize("op", TBE_BACKWARD)
def test_tbe_backward_kernels(op: str) -> None:
    assert _matching_rules("trc", "backward", op) == ["tbe_backward"]


@pytest.mark.parametrize("op", NEITHER)
def test_other_tbe_work_has_no_formula(op: str) -> None:
    assert _matching_rules("trc", "forward", op) == _matching_rules("trc", "backward", op) == []


def test_dyn_ops_match_with_or_without_prefix() -> None:
    assert _matching_rules("dyn", "forward", "op:gather_embedding") == ["gather_embedding"]
    assert _matching_rules("dyn", "backward", "optimizer_update_padded") == ["optimizer_update"]
    assert _matching_rules("trc", "forward", "gather_embedding") == []


def test_unknown_optimizer_leaves_only_its_formulas_undefined() -> None:
    variables, notes = TABLE.variables_for(RECORD | {"optimizer_type": "lamb"})
    assert "state_bytes_per_row" not in variables and variables["row_bytes"] == ROW
    assert any("optimizer_type='lamb' has no case" in n for n in notes)


@pytest.mark.parametrize("value", [None, "many", True, float("nan")])
def test_broken_record_field_is_an_error(value: object) -> None:
    with pytest.raises(ContractError, match="avg_n_unique"):
        TABLE.variables_for(RECORD | {"avg_n_unique": value})


def test_datasheet_lookup_prefers_specific_names() -> None:
    assert TABLE.datasheet_peak("NVIDIA H200").gbps == 4800
    assert TABLE.datasheet_peak("NVIDIA H100 80GB HBM3").gbps == 3350
    assert TABLE.datasheet_peak("NVIDIA H100 PCIe").gbps == 2000
    assert TABLE.datasheet_peak("NVIDIA A100-SXM4-80GB").gbps == 2039
    assert TABLE.datasheet_peak("NVIDIA A100-PG509-200").gbps == 1555
    assert TABLE.datasheet_peak("NVIDIA L40S").gbps == 864
    assert TABLE.datasheet_peak("Some Other GPU") is None


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = DEFAULT_TABLE.read_text()
    assert old in text
    path = tmp_path / "bandwidth.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "bytes: n_total * key_bytes",
            "bytes: n_totl * key_bytes",
            r"ops/segmented_unique.*undefined name\(s\): n_totl",
        ),
        ("bytes: n_total * key_bytes", "bytes: n_total.__class__", "Attribute is not allowed"),
        ("row_bytes: dim * elem_bytes", "row_bytes: dim * elem_bytes * num_bags", "undefined name"),
        ("backend: dyn", "backend: gpu", "at ops/segmented_unique/backend"),
        ("op_regex: '^(fbgemm", "op_regex: '^((fbgemm", "missing \\)"),
        ("by: optimizer", "by: optimiser", "not a choice field"),
        ("version: 1", "version: 2", "at version"),
        ("    moves: reads every id;", "    mvoes: reads every id;", "segmented_unique"),
    ],
)
def test_table_errors_name_the_problem(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_table(_broken(tmp_path, old, new))


def test_unreadable_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_table(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("ops: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_table(tmp_path / "bad.yaml")
