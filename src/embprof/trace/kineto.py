"""PyTorch profiler (Kineto) Chrome traces, ``.json`` and ``.json.gz``.

Ranges are ``user_annotation`` events (``record_function``), per pid/tid.
GPU work (``kernel``, ``gpu_memcpy``, ``gpu_memset``) is joined to its
``cuda_runtime``/``cuda_driver`` launch by ``args.correlation`` (a trace is
one process). Without any GPU work the trace comes from a CPU-only run:
leaf CPU operators (``cpu_op`` events with no ``cpu_op`` nested inside, on
the same thread) stand in for kernels, as DESIGN.md says.

Timestamps are microseconds (floats); they are made relative to the trace's
first event before scaling to integer ns, so float64 keeps ns precision.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from embprof.errors import TraceError

from .model import (
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    TIME_CPU_LEAF,
    TIME_GPU,
    CallRows,
    RangeRows,
    WorkRows,
)
from .names import kineto_memory_kind, kineto_memory_name, short_kernel_name

_WORK_KIND = {"kernel": KIND_KERNEL, "gpu_memcpy": KIND_MEMCPY, "gpu_memset": KIND_MEMSET}
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
_WINDOW = "Trace"  # Kineto's event for the profiler's whole window
_WINDOW_SLACK_US = 1.0  # float rounding of ts + dur


def _load_events(path: Path) -> list[dict]:
    try:
        with path.open("rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw)
    except (EOFError, OSError, zlib.error) as exc:
        raise TraceError(path, f"truncated or corrupt gzip stream ({exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(path, f"not valid JSON, truncated? ({exc})") from None
    except RecursionError:
        raise TraceError(path, "JSON nested too deeply to be a PyTorch profiler trace") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(path, "JSON without a traceEvents list: not a PyTorch profiler trace")
    return events


def _microseconds(column: pd.Series) -> np.ndarray:
    """A ts or dur column as float microseconds; NaN where a value is missing, text or not finite."""
    values = pd.to_numeric(column, errors="coerce").to_numpy(np.float64, copy=True)
    values[~np.isfinite(values)] = np.nan
    return values


def _plain(value: object) -> object:
    """A numpy scalar as the Python value it holds (for a message)."""
    return value.item() if isinstance(value, np.generic) else value


def _frame(path: Path, events: list[dict]) -> pd.DataFrame:
    """The complete ('X') events of the categories we use, as columns; every one must have a
    numeric start and a duration >= 0 that ends within the profiler's window."""
    wanted = {"user_annotation", "cpu_op", *_WORK_KIND, *_LAUNCH_CATS, _WINDOW}
    rows = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in wanted]
    _check_text(path, [str(e.get("name")) for e in rows])
    df = pd.DataFrame.from_records(rows, columns=["cat", "name", "pid", "tid", "ts", "dur", "args"])
    is_window = (df["cat"] == _WINDOW).to_numpy()
    window = df[is_window]
    df = df[~is_window].reset_index(drop=True)
    if df.empty:
        raise TraceError(path, "no profiler events (user_annotation, cpu_op, kernel) in traceEvents")
    ts, dur = _microseconds(df["ts"]), _microseconds(df["dur"])
    ranges = (df["cat"] == "user_annotation").to_numpy()
    unclosed = int(np.count_nonzero(ranges & df["dur"].isna().to_numpy()))
    if unclosed:
        raise TraceError(path, f"{unclosed} user_annotation range(s) never closed (no duration)")
    odd = np.isnan(ts) | np.isnan(dur)
    if odd.any():
        cat, t, d = (_plain(v) for v in df.loc[odd, ["cat", "ts", "dur"]].iloc[0])
        raise TraceError(path, f"{int(odd.sum())} event(s) without a finite, numeric ts and dur "
                               f"(first: {cat} ts={t!r} dur={d!r})")
    if (dur < 0).any():
        raise TraceError(path, f"{int((dur < 0).sum())} event(s) with a negative duration")
    stops = _microseconds(window["ts"]) + _microseconds(window["dur"])
    if np.isfinite(stops).any():
        late = int(np.count_nonzero(ranges & (ts + dur > stops[np.isfinite(stops)].max() + _WINDOW_SLACK_US)))
        if late:
            raise TraceError(path, f"{late} user_annotation range(s) end after the profiler stopped: they never ended")
    t0 = ts.min()
    start = np.rint((ts - t0) * 1000.0).astype(np.int64)
    df = df.assign(
        start=start,
        end=start + np.rint(dur * 1000.0).astype(np.int64),
        thread=_thread_key(df["pid"], df["tid"]),
    )
    return df


def _check_text(path: Path, names: list[str]) -> None:
    """Every event name encodes as UTF-8 (JSON lets ``\\ud800``, a lone surrogate, through): one
    line naming the first that does not, never an error where the name is stored or written."""
    joined = "\0".join(names)
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError as exc:
        name = names[joined.count("\0", 0, exc.start)]
        raise TraceError(path, f"event name {name!r} is not text ({exc.reason})") from None


def _thread_key(pid: pd.Series, tid: pd.Series) -> np.ndarray:
    """One int64 per (pid, tid); Kineto writes some tids as negative or string labels."""
    pair = pid.astype(str) + "/" + tid.astype(str)
    codes, _ = pd.factorize(pair)
    return codes.astype(np.int64)


def _correlation(args: pd.Series) -> np.ndarray:
    return np.fromiter(
        (a.get("correlation", -1) if isinstance(a, dict) else -1 for a in args), dtype=np.int64, count=len(args)
    )


def _bytes(args: pd.Series) -> np.ndarray:
    """A copy's or memset's ``args.bytes`` (0 where it has none)."""
    return np.fromiter(
        (int(a.get("bytes", 0)) if isinstance(a, dict) and isinstance(a.get("bytes", 0), int | float) else 0
         for a in args), dtype=np.int64, count=len(args)
    )


def leaf_mask(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """True for intervals with no other interval of the same thread nested inside them.

    j is inside i when it starts in [start_i, end_i) and ends by end_i, or is
    an identical interval listed after i. Sorted by (thread, start, -end), a
    nested interval is always the next one after its encloser, so one shifted
    comparison decides it.
    """
    order = np.lexsort((-end, start, thread))
    t, s, e = thread[order], start[order], end[order]
    has_child = np.zeros(len(order), dtype=bool)
    same = t[1:] == t[:-1]
    starts_inside = (s[1:] < e[:-1]) & (e[1:] <= e[:-1])
    identical = (s[1:] == s[:-1]) & (e[1:] == e[:-1])
    has_child[:-1] = same & (starts_inside | identical)
    mask = np.empty(len(order), dtype=bool)
    mask[order] = ~has_child
    return mask


class KinetoSource:
    """A Kineto trace as one chunk per stream (:class:`~embprof.trace.model.TraceSource`): JSON is
    parsed whole anyway."""

    def __init__(self, path: Path) -> None:
        self.path = path
        df = _frame(path, _load_events(path))
        ann = df[df["cat"] == "user_annotation"]
        # One trace, one process: its calls and ranges share process key 0.
        self._ranges = RangeRows(thread=ann["thread"].to_numpy(), process=np.zeros(len(ann), np.int64),
                                 start=ann["start"].to_numpy(),
                                 end=ann["end"].to_numpy(), names=pa.array(ann["name"].astype(str).tolist(), pa.string()))
        gpu = df[df["cat"].isin(list(_WORK_KIND))]
        if len(gpu):
            self.time_source = TIME_GPU
            launches = df[df["cat"].isin(_LAUNCH_CATS)]
            kind = gpu["cat"].map(_WORK_KIND).to_numpy(np.int8)
            short = np.where(
                kind == KIND_KERNEL,
                gpu["name"].astype(str).map(short_kernel_name).to_numpy(object),
                [kineto_memory_name(n, c) for n, c in zip(gpu["name"].astype(str), gpu["cat"], strict=True)],
            )
            codes, names = pd.factorize(pd.Series(short))
            self._calls = CallRows(process=np.zeros(len(launches), np.int64), corr=_correlation(launches["args"]),
                                   thread=launches["thread"].to_numpy(), start=launches["start"].to_numpy())
            mem = np.array([0 if k == KIND_KERNEL else kineto_memory_kind(n, c)
                            for n, c, k in zip(gpu["name"].astype(str), gpu["cat"], kind, strict=True)], np.int64)
            self._work = WorkRows(process=np.zeros(len(gpu), np.int64), corr=_correlation(gpu["args"]),
                                  start=gpu["start"].to_numpy(), end=gpu["end"].to_numpy(), kind=kind,
                                  name=codes.astype(np.int64),
                                  nbytes=np.where(kind == KIND_KERNEL, 0, _bytes(gpu["args"])), mem=mem)
            self._names = list(names)
            return
        ops = df[df["cat"] == "cpu_op"]
        if ops.empty:
            raise TraceError(path, "no GPU kernels and no cpu_op events: nothing to attribute")
        self.time_source = TIME_CPU_LEAF
        th, st, en = ops["thread"].to_numpy(), ops["start"].to_numpy(), ops["end"].to_numpy()
        leaf = np.flatnonzero(leaf_mask(th, st, en))
        codes, names = pd.factorize(ops["name"].astype(str).to_numpy()[leaf])
        ids = np.arange(len(leaf), dtype=np.int64)  # each leaf is its own launch
        self._calls = CallRows(process=np.zeros(len(leaf), np.int64), corr=ids, thread=th[leaf], start=st[leaf])
        self._work = WorkRows(process=np.zeros(len(leaf), np.int64), corr=ids, start=st[leaf], end=en[leaf],
                              kind=np.zeros(len(leaf), np.int8), name=codes.astype(np.int64),
                              nbytes=np.zeros(len(leaf), np.int64), mem=np.zeros(len(leaf), np.int64))
        self._names = list(names)

    def ranges(self) -> Iterator[RangeRows]:
        yield self._ranges

    def calls(self) -> Iterator[CallRows]:
        yield self._calls

    def work(self) -> list[Iterator[WorkRows]]:
        return [iter([self._work])]

    def work_names(self, kind: int, ids: np.ndarray) -> list[str]:
        return [self._names[i] for i in ids.tolist()]

    def close(self) -> None:
        pass
