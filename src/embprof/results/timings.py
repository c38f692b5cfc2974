"""Per-repeat timings in a benchmark record (docs/DESIGN.md, "Benchmark result record").

A record's ``timings`` maps every metric (``dyn_train_ms``, ...) to its repeats
and their summary, or to null where the backend did not run; the flat field of
the same name holds the median. Records written before repeats existed have no
``timings``: they read as one repeat of the flat value, with no spread. Records
written before NVIDIA's dynamicemb (``nv``) was a backend have no ``nv_*``
metrics: they read as a backend that did not run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from embprof.errors import ContractError
from embprof.stats import summarize

# dyn: this project's library; trc: FBGEMM's TBE (what TorchRec runs); nv: NVIDIA's dynamicemb
# (since issue 31). The order is the order a benchmark runs them in and a record lists them.
BACKENDS = ("dyn", "trc", "nv")
PHASES = ("forward", "backward", "train", "eval")


def backend_metrics(*backends: str) -> tuple[str, ...]:
    """``<backend>_<phase>_ms`` of each backend, phase by phase."""
    return tuple(f"{b}_{p}_ms" for b in backends for p in PHASES)


# What a new record's ``timings`` maps exactly (since issue 31, with nv's).
RECORD_METRICS = backend_metrics(*BACKENDS)
# dyn's and trc's: the metrics of records from issue 20 on, the columns the results database holds.
TIMING_METRICS = backend_metrics("dyn", "trc")
STAT_KEYS = ("median", "p90", "min", "max", "spread_pct")
# What measured the times: CUDA events on a GPU, the process's CPU time on the CPU.
TIMERS = ("cuda_events", "cpu_time")
WALL_CLOCK = "wall_clock"  # what records from before the timer field used on the CPU


def timing_entry(values: Sequence[float]) -> dict[str, Any]:
    """What a record holds for one metric: its repeats and their summary."""
    return {"repeats": [float(v) for v in values], **summarize(values)}


def repeat_values(record: Mapping[str, Any], metric: str) -> list[float]:
    """The metric's per-repeat values; an older record's flat value as one repeat; [] where absent."""
    entry = (record.get("timings") or {}).get(metric)
    if isinstance(entry, Mapping) and isinstance(entry.get("repeats"), list):
        return [float(v) for v in entry["repeats"]]
    value = record.get(metric)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return [float(value)]
    return []


def timing_summary(record: Mapping[str, Any], metric: str) -> dict[str, Any] | None:
    """The metric's repeats and summary (older records: one repeat, spread None); None where absent."""
    values = repeat_values(record, metric)
    return timing_entry(values) if values else None


def timer_of(record: Mapping[str, Any]) -> str:
    """The record's ``timer``; for records from before it, what the benchmark then used (CUDA
    events on a GPU, the wall clock on the CPU)."""
    timer = record.get("timer")
    if timer:
        return str(timer)
    return "cuda_events" if str(record.get("device") or "").startswith("cuda") else WALL_CLOCK


def _is_ms(value: Any) -> bool:
    """A time in ms: a number (not a boolean) that is >= 0 or NaN (no time: what older files held)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isnan(value) or (math.isfinite(value) and value >= 0)


def check_timing_values(record: Mapping[str, Any]) -> None:
    """Every time a record holds is a time in ms or null, of any record old or new: a string
    would stop every reader, and a negative time would read as a speed-up."""
    timings = record.get("timings")
    if timings is not None and not isinstance(timings, Mapping):
        raise ContractError(f"timings must be an object, got {type(timings).__name__}")
    for metric in TIMING_METRICS:
        flat = record.get(metric)
        if flat is not None and not _is_ms(flat):
            raise ContractError(f"{metric} is {flat!r}, not a time in ms (a number >= 0, or null)")
        entry = (timings or {}).get(metric)
        if entry is None:
            continue
        values = entry.get("repeats") if isinstance(entry, Mapping) else None
        if not isinstance(values, list):
            raise ContractError(f"timings[{metric!r}] must be null or hold a list of repeats")
        for i, value in enumerate(values):
            if not _is_ms(value) or math.isnan(value):
                raise ContractError(f"timings[{metric!r}] repeat {i} is {value!r}, not a time in ms (a number >= 0)")


def check_timings(record: Mapping[str, Any]) -> None:
    """A new record's ``repeats`` and ``timings`` agree with each other and with its flat fields."""
    repeats, timings = record.get("repeats"), record.get("timings")
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ContractError(f"record repeats must be an integer >= 1, got {repeats!r}")
    if record.get("timer") not in TIMERS:
        raise ContractError(f"record timer must be one of {TIMERS}, got {record.get('timer')!r}")
    if not isinstance(timings, Mapping) or set(timings) != set(RECORD_METRICS):
        raise ContractError(f"record timings must map exactly {list(RECORD_METRICS)}")
    for metric in RECORD_METRICS:
        entry, flat = timings[metric], record.get(metric)
        if entry is None:
            if flat is not None:
                raise ContractError(f"record {metric} is {flat!r} but its timings entry is null")
            continue
        values = entry.get("repeats") if isinstance(entry, Mapping) else None
        if not isinstance(values, list) or len(values) != repeats:
            raise ContractError(f"record timings[{metric!r}] must hold {repeats} repeats")
        if set(entry) != {"repeats", *STAT_KEYS} or flat != entry["median"]:
            raise ContractError(f"record timings[{metric!r}]: keys {sorted(entry)}, median must equal {metric}")
