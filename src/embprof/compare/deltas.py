"""Per-config and per-op deltas between two runs, each marked a change or within noise.

The test (docs/COMPARE.md): a delta is a **change** when the Mann-Whitney U
test on the two runs' samples rejects "same distribution" at ALPHA (two-sided)
**and** the delta is larger than the noise, the larger of the two runs'
spreads ((max - min) / median of the samples, in %). A per-config metric's
samples are its repeats and its value their median; a per-op row's samples are
its ms in each profiled iteration and its value their mean (``avg_ms_per_iter``,
what the per-op table adds up). Where the samples are too few for the test to
ever reach ALPHA (fewer than 4 against 4, say, or one repeat of an older
record) the delta is **untested**.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from embprof.results.run import Run
from embprof.results.samples import sample_matrix
from embprof.results.timings import repeat_values
from embprof.stats import ALPHA, can_reject, mann_whitney_p, spread_pct

METRICS = ("dyn_train_ms", "dyn_eval_ms", "trc_train_ms", "trc_eval_ms")  # these first, in this order
_METRIC = re.compile(r"^([A-Za-z0-9]+)_(train|eval)_ms$")
OP_KEYS = ["label", "backend", "phase", "op"]
CHANGE, NOISE, UNTESTED, NEW, REMOVED = "change", "within noise", "untested", "new", "removed"
STAT_COLUMNS = [
    "before_ms", "before_spread_pct", "before_n", "after_ms", "after_spread_pct", "after_n",
    "delta_ms", "delta_pct", "noise_pct", "p_value", "verdict",
]


@dataclass(frozen=True)
class Comparison:
    """Everything one comparison found: ``configs`` (label, metric) and ``ops`` (label,
    backend, phase, op), each with :data:`STAT_COLUMNS`; ``warnings`` about the environments."""

    old: str
    new: str
    configs: pd.DataFrame
    ops: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    alpha: float = ALPHA

    def tally(self) -> str:
        """One line: how many config metrics changed (and which way), how many did not."""
        verdict, delta = self.configs["verdict"], self.configs["delta_ms"]
        slower = int(((verdict == CHANGE) & (delta > 0)).sum())
        faster = int(((verdict == CHANGE) & (delta <= 0)).sum())
        counts = {v: int((verdict == v).sum()) for v in (NOISE, UNTESTED, NEW, REMOVED)}
        rest = [f"{counts[NOISE]} config metrics within noise"] if counts[NOISE] else []
        rest += [f"{counts[v]} {v}" for v in (UNTESTED, NEW, REMOVED) if counts[v]]
        if not slower + faster + counts[NOISE] + counts[UNTESTED]:
            return "no config metric timed in both runs" + (f" ({', '.join(rest)})" if rest else "")
        if not slower + faster:
            return "no change: " + ", ".join(rest)
        ways = ", ".join(f"{n} {way}" for n, way in ((slower, "slower"), (faster, "faster")) if n)
        changes = f"{slower + faster} change{'s' if slower + faster > 1 else ''} ({ways})"
        return ", ".join([changes, *rest])

    def largest_ops(self, limit: int) -> pd.DataFrame:
        """The ``limit`` op rows that moved most by ms: changes first, then the rest."""
        ops = self.ops[self.ops["delta_ms"].fillna(0) != 0]
        order = np.lexsort((
            ops["op"].to_numpy(), ops["label"].to_numpy(), -ops["delta_ms"].abs().to_numpy(),
            (ops["verdict"] != CHANGE).to_numpy(),
        ))
        return ops.iloc[order].head(limit).reset_index(drop=True)


def judge(
    before: np.ndarray, after: np.ndarray, before_ms: np.ndarray, after_ms: np.ndarray,
    present: np.ndarray, alpha: float = ALPHA,
) -> pd.DataFrame:
    """:data:`STAT_COLUMNS` for rows of samples (rows x values, NaN-padded at the end of a row).

    ``present`` holds per row "both", "new" or "removed"; ``*_ms`` are the rows' values.
    """
    before_n = np.sum(~np.isnan(before), axis=1)
    after_n = np.sum(~np.isnan(after), axis=1)
    p_value = np.full(len(before), np.nan)
    sizes = pd.DataFrame({"b": before_n, "a": after_n})
    testable = np.zeros(len(before), dtype=bool)
    for (nb, na), rows in sizes.groupby(["b", "a"]).groups.items():
        if nb >= 2 and na >= 2:
            rows = np.asarray(rows)
            p_value[rows] = mann_whitney_p(before[rows, :nb], after[rows, :na])
            testable[rows] = can_reject(int(nb), int(na), alpha)
    spreads = np.stack([spread_pct(before), spread_pct(after)])
    noise = np.where(np.isnan(spreads).all(axis=0), 0.0, np.nanmax(np.nan_to_num(spreads, nan=-1.0), axis=0))
    delta_ms = after_ms - before_ms
    with np.errstate(divide="ignore", invalid="ignore"):
        delta_pct = np.where(before_ms > 0, 100.0 * delta_ms / before_ms, np.nan)
    changed = testable & (p_value < alpha) & (np.abs(np.nan_to_num(delta_pct, nan=np.inf)) > noise)
    verdict = np.where(changed, CHANGE, np.where(testable, NOISE, UNTESTED)).astype(object)
    verdict[present == "new"] = NEW
    verdict[present == "removed"] = REMOVED
    return pd.DataFrame({
        "before_ms": before_ms, "before_spread_pct": spreads[0], "before_n": before_n,
        "after_ms": after_ms, "after_spread_pct": spreads[1], "after_n": after_n,
        "delta_ms": delta_ms, "delta_pct": delta_pct, "noise_pct": noise, "p_value": p_value,
        "verdict": verdict,
    })


def _padded(rows: Sequence[Sequence[float]]) -> np.ndarray:
    """Rows of different lengths as one NaN-padded matrix."""
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    out = np.full((len(rows), int(lengths.max()) if len(rows) else 0), np.nan)
    if lengths.sum():
        flat = np.concatenate([np.asarray(r, dtype=float) for r in rows if len(r)])
        row = np.repeat(np.arange(len(rows)), lengths)
        col = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        out[row, col] = flat
    return out


def config_metrics(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The train and eval metrics of every backend the records time: :data:`METRICS` first, then
    those of other backends (``nv_train_ms``, ...) by backend."""
    found = {m for r in records for m in (*r, *(r.get("timings") or {})) if _METRIC.match(str(m))}
    others = sorted(found - set(METRICS), key=lambda m: (_METRIC.match(m)[1], m.endswith("_eval_ms")))
    return [*METRICS, *others]


def _config_side(records: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """(label, metric, ms) of every timed metric of the ok records, and its repeats."""
    keys, samples = [], []
    for record in records:
        if record.get("status", "ok") != "ok":
            continue
        for metric in metrics:
            values = repeat_values(record, metric)
            if values:
                keys.append((record["label"], metric, float(np.median(values))))
                samples.append(values)
    return pd.DataFrame(keys, columns=["label", "metric", "ms"]), _padded(samples)


def config_deltas(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], alpha: float = ALPHA
) -> pd.DataFrame:
    """One row per (config, metric) timed in either run, of every backend the records time, marked
    by :func:`judge`."""
    metrics = config_metrics([*old, *new])
    (before, b_samples), (after, a_samples) = _config_side(old, metrics), _config_side(new, metrics)
    merged = _merge(before, after, ["label", "metric"])
    merged["metric"] = pd.Categorical(merged["metric"], categories=metrics, ordered=True)
    merged = merged.sort_values(["label", "metric"]).reset_index(drop=True)
    merged["metric"] = merged["metric"].astype(str)
    return _judged(merged, b_samples, a_samples, ["label", "metric"], alpha)


def _op_side(run: Run, labels: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """(label, backend, phase, op, ms) summed over stages, and its per-iteration samples (summed over
    stages too; NaN where the run has none: a per-op CSV older than samples)."""
    parts, samples = [], []
    for label in labels:
        ms = run.opcalls[label].groupby(OP_KEYS[1:], sort=True)["avg_ms_per_iter"].sum()
        ms = ms.reset_index().rename(columns={"avg_ms_per_iter": "ms"})
        keys, matrix = sample_matrix(run.samples[label], OP_KEYS[1:])
        row = ms[OP_KEYS[1:]].merge(keys.assign(row=np.arange(len(keys))), on=OP_KEYS[1:], how="left")["row"]
        parts.append(ms.assign(label=label))
        samples.append(_rows_of(matrix, row.fillna(-1).to_numpy(dtype=np.int64)))
    if not parts:
        return pd.DataFrame(columns=[*OP_KEYS, "ms"]), np.zeros((0, 0))
    width = max(s.shape[1] for s in samples)
    padded = np.concatenate([np.pad(s, ((0, 0), (0, width - s.shape[1])), constant_values=np.nan) for s in samples])
    return pd.concat(parts, ignore_index=True)[[*OP_KEYS, "ms"]], padded


def op_deltas(old: Run, new: Run, alpha: float = ALPHA) -> pd.DataFrame:
    """Every (config, backend, phase, op) of the configs profiled in both runs (their per-op tables
    and samples), marked by :func:`judge`. An op on one side only is new or removed, and counts
    0 ms on the other."""
    shared = sorted(set(old.opcalls) & set(new.opcalls))
    (before, b_samples), (after, a_samples) = _op_side(old, shared), _op_side(new, shared)
    merged = _merge(before, after, OP_KEYS)
    merged[["before_ms", "after_ms"]] = merged[["before_ms", "after_ms"]].fillna(0.0)
    return _judged(merged, b_samples, a_samples, OP_KEYS, alpha)


def _merge(before: pd.DataFrame, after: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Rows of either side; ``b_row``/``a_row`` index each side's samples (-1: absent)."""
    before = before.assign(b_row=np.arange(len(before))).rename(columns={"ms": "before_ms"})
    after = after.assign(a_row=np.arange(len(after))).rename(columns={"ms": "after_ms"})
    merged = before.merge(after, on=keys, how="outer", indicator=True)
    merged["present"] = merged.pop("_merge").map({"both": "both", "left_only": "removed", "right_only": "new"}).astype(str)
    merged[["b_row", "a_row"]] = merged[["b_row", "a_row"]].fillna(-1).astype(np.int64)
    return merged


def _rows_of(samples: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``samples[index]``, an all-NaN row where the index is -1."""
    width = samples.shape[1] if samples.ndim == 2 else 0
    out = np.full((len(index), width), np.nan)
    there = index >= 0
    out[there] = samples[index[there]]
    return out


def _judged(merged: pd.DataFrame, b_samples: np.ndarray, a_samples: np.ndarray, keys: list[str], alpha: float) -> pd.DataFrame:
    stats = judge(
        _rows_of(b_samples, merged["b_row"].to_numpy()), _rows_of(a_samples, merged["a_row"].to_numpy()),
        merged["before_ms"].to_numpy(dtype=float), merged["after_ms"].to_numpy(dtype=float),
        merged["present"].to_numpy(), alpha,
    )
    return pd.concat([merged[keys].reset_index(drop=True), stats], axis=1)
