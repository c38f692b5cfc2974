"""Achieved bandwidth of every op of one config: table bytes over measured time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from embprof.bandwidth.table import BandwidthTable
from embprof.errors import ConfigError, ContractError, FormulaError
from embprof.results.bandwidth import COLUMNS

OPCALLS_NEEDED = ("backend", "phase", "parent_stages", "op", "avg_ms_per_iter")
TRACED_BYTES = "copy_bytes_per_iter"  # the per-op CSV's bytes of copies and memsets
MEMSET_KIND = "device"  # a memset's memory kind as the per-op CSV names it (it writes device memory)


def _traced_bytes(opcalls: pd.DataFrame, unmatched: np.ndarray) -> np.ndarray:
    """Rows with bytes the trace counted (copies and memsets) and no rule of the table."""
    if TRACED_BYTES not in opcalls.columns:  # a per-op CSV from before issue 19
        return np.zeros(len(opcalls), bool)
    counted = pd.to_numeric(opcalls[TRACED_BYTES], errors="coerce").to_numpy(dtype=float)
    return unmatched & ~np.isnan(counted)


def _copy_peak(kinds: str, copy_gbps: Mapping[str, float], peak_gbps: float | None) -> float:
    """The peak a row of copies (or memsets) is rated against; NaN where there is none."""
    if kinds == MEMSET_KIND:
        return peak_gbps or np.nan
    return copy_gbps.get(kinds, np.nan)  # several kinds ("a;b") name no one peak


def _copy_label(kinds: str, copy_gbps: Mapping[str, float]) -> str:
    if kinds == MEMSET_KIND:
        return "trace: bytes set (device memory), % of the device's peak"
    against = f", % of the {kinds} copy peak" if kinds in copy_gbps else ", no copy peak of this kind"
    return f"trace: bytes copied ({kinds or 'kind unknown'}){against}"


def achieved_bandwidth(
    opcalls: pd.DataFrame,
    record: Mapping[str, Any] | None,
    table: BandwidthTable,
    peak_gbps: float | None,
    copy_gbps: Mapping[str, float] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """One row per row of ``opcalls`` (columns :data:`COLUMNS`), and notes on what was left blank.

    Rows no rule matches keep empty bytes, GB/s and % of peak. Rows one rule
    matches under the same backend, phase and stages form one group: the
    formula's bytes over the group's summed time is every member's GB/s.
    Without a record (the config's timing run failed, so no ids were counted)
    every row keeps its formula but no bytes.

    Copies and memsets need no formula: the trace counted their bytes (the per-op CSV's
    ``copy_bytes_per_iter`` and ``memory_kinds``, since issue 19). A copy's % is of the peak of its
    kind of copy (``copy_gbps``, from the peak file; none where it has no such peak or the row
    holds copies of several kinds), a memset's of the device's peak (it writes its bytes).
    """
    missing = [c for c in OPCALLS_NEEDED if c not in opcalls.columns]
    if missing:
        raise ContractError(f"per-op CSV lacks column(s): {', '.join(missing)}")
    rows = opcalls.loc[:, list(OPCALLS_NEEDED)].reset_index(drop=True)
    rows["parent_stages"] = rows["parent_stages"].fillna("").astype(str)
    ms = pd.to_numeric(rows["avg_ms_per_iter"], errors="coerce").to_numpy(dtype=float)
    if np.isnan(ms).any() or (ms < 0).any():
        raise ContractError("per-op CSV has avg_ms_per_iter values that are not non-negative numbers")
    variables, notes = table.variables_for(record) if record is not None else ({}, [])
    if record is None:
        notes.append("no benchmark record (its timing run failed?): no bytes for any op")

    rule_of = np.full(len(rows), -1)
    for index, rule in enumerate(table.rules):
        hit = rule.matches(rows)
        clash = hit & (rule_of >= 0)
        if clash.any():
            other = table.rules[rule_of[np.argmax(clash)]].name
            op = rows["op"].iloc[int(np.argmax(clash))]
            raise ConfigError(f"op {op!r} is matched by two rules, {other!r} and {rule.name!r}")
        rule_of[hit] = index

    bytes_per_iter = np.full(len(rows), np.nan)
    gbps = np.full(len(rows), np.nan)
    formula = np.full(len(rows), "", dtype=object)
    matched = rows[rule_of >= 0].assign(rule=rule_of[rule_of >= 0], ms=ms[rule_of >= 0])
    for (rule_index, _, _, _), group in matched.groupby(
        ["rule", "backend", "phase", "parent_stages"], sort=False
    ):
        rule = table.rules[rule_index]
        members = group.index.to_numpy()
        formula[members] = rule.label
        undefined = sorted(rule.bytes.names - variables.keys())
        if undefined and record is not None:
            notes.append(f"{rule.name}: no bytes, undefined {', '.join(undefined)}")
        if undefined:
            continue
        try:
            total_bytes = float(rule.bytes(variables))
        except FormulaError as exc:
            notes.append(f"{rule.name}: no bytes, {exc}")
            continue
        total_ms = float(group["ms"].sum())
        if total_ms > 0:
            bytes_per_iter[members] = total_bytes * group["ms"].to_numpy() / total_ms
            gbps[members] = total_bytes / total_ms / 1e6
        else:
            bytes_per_iter[members] = total_bytes / len(members)
    pct = gbps / peak_gbps * 100.0 if peak_gbps else np.full(len(rows), np.nan)
    traced = _traced_bytes(opcalls, rule_of < 0)
    if traced.any():
        kinds = opcalls["memory_kinds"].fillna("").astype(str).to_numpy()
        counted = pd.to_numeric(opcalls[TRACED_BYTES], errors="coerce").to_numpy(dtype=float)
        bytes_per_iter[traced] = counted[traced]
        gbps[traced] = np.where(ms[traced] > 0, counted[traced] / np.where(ms[traced] > 0, ms[traced], 1.0) / 1e6, np.nan)
        against = np.array([_copy_peak(k, copy_gbps or {}, peak_gbps) for k in kinds[traced]])
        pct[traced] = gbps[traced] / against * 100.0
        formula[traced] = [_copy_label(k, copy_gbps or {}) for k in kinds[traced]]
    out = pd.DataFrame(
        {
            "backend": rows["backend"],
            "phase": rows["phase"],
            "parent_stages": rows["parent_stages"],
            "op": rows["op"],
            "bytes_per_iter": bytes_per_iter,
            "avg_ms_per_iter": ms,
            "achieved_gbps": gbps,
            "pct_of_peak": pct,
            "formula": formula,
        },
        columns=list(COLUMNS),
    )
    return out, notes
