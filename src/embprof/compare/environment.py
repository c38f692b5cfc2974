"""What differs between the environments of two runs: the warnings a comparison prints first.

Each run's facts come from its records (written where the benchmark ran) and,
where records lack them, its ``environment.json``. A fact known on one side
only is not a difference; a run whose records hold no provenance at all says
so once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from embprof.results.provenance import NOT_RECORDED, read_provenance
from embprof.results.run import Run
from embprof.results.timings import timer_of

# (what the warning calls it, the value in one record, the value in environment.json)
Getter = Callable[[Mapping[str, Any]], Any]
_FACTS: tuple[tuple[str, Getter, Getter], ...] = (
    ("device", lambda r: _device(r.get("device")), lambda e: e.get("device")),
    ("GPU", lambda r: r.get("gpu_name"), lambda e: e.get("gpu_name")),
    ("timer", timer_of, lambda e: None),
    ("commit", lambda r: read_provenance(r)["git_commit"], lambda e: read_provenance(e)["git_commit"]),
    ("dynemb kernel path", lambda r: read_provenance(r)["kernel_path"], lambda e: read_provenance(e)["kernel_path"]),
    ("torch", lambda r: r.get("torch_version"), lambda e: e.get("torch")),
    ("fbgemm_gpu", lambda r: r.get("fbgemm_gpu_version"), lambda e: e.get("fbgemm_gpu")),
    ("torchrec", lambda r: r.get("torchrec_version"), lambda e: e.get("torchrec")),
    ("Triton", lambda r: read_provenance(r)["triton"], lambda e: read_provenance(e)["triton"]),
    ("CUDA", lambda r: read_provenance(r)["cuda"], lambda e: read_provenance(e)["cuda"]),
    ("driver", lambda r: read_provenance(r)["driver"], lambda e: e.get("driver")),
    ("torch threads", lambda r: read_provenance(r)["torch_threads"], lambda e: read_provenance(e)["torch_threads"]),
    ("preset", lambda r: None, lambda e: e.get("preset")),
    ("profiler", lambda r: None, lambda e: e.get("profiler")),
)


def _device(device: Any) -> str | None:
    return None if device is None else ("cuda" if str(device).startswith("cuda") else str(device))


def facts(run: Run) -> dict[str, set[str]]:
    """Per fact, the values the run's records hold (else its environment.json's)."""
    out = {}
    for name, of_record, of_env in _FACTS:
        values = {str(v) for v in (of_record(r) for r in run.records) if v is not None}
        if not values and of_env(run.environment) is not None:
            values = {str(of_env(run.environment))}
        out[name] = values
    return out


def environment_warnings(old: Run, new: Run) -> list[str]:
    """One line per fact the runs differ on, per run that mixes values of one, per run measured
    with uncommitted changes or on a busy host, and per run without provenance."""
    warnings: list[str] = []
    before, after = facts(old), facts(new)
    for name, _, _ in _FACTS:
        a, b = before[name], after[name]
        if a and b and a != b:
            warnings.append(f"{name} differs: {_values(a)} in {old.name}, {_values(b)} in {new.name}")
    for run, found in ((old, before), (new, after)):
        mixed = [f"{name} ({_values(values)})" for name, values in found.items() if len(values) > 1]
        if mixed:
            warnings.append(f"{run.name} mixes records of more than one {', '.join(mixed)}")
        warnings += _run_warnings(run)
    return list(dict.fromkeys(warnings))  # a run compared with itself says each thing once


def _run_warnings(run: Run) -> list[str]:
    provenance = [read_provenance(r) for r in run.records]
    if not provenance:
        return []
    out = []
    if all(p["null_reasons"].get("git_commit") == NOT_RECORDED for p in provenance):
        out.append(
            f"{run.name} has no provenance (written before embprof recorded it): its commit, "
            "kernel path, Triton, CUDA and clocks cannot be compared"
        )
    dirty = sum(p["git_dirty"] is True for p in provenance)
    if dirty:
        out.append(f"{run.name}: {dirty} of {len(provenance)} timing runs measured uncommitted changes")
    busy = [p for p in provenance if _busy(p)]
    if busy:
        worst = max(busy, key=lambda p: p["host_load_1m"] / p["cpu_count"])
        out.append(
            f"{run.name}: {len(busy)} of {len(provenance)} timing runs started on a busy host "
            f"(load up to {worst['host_load_1m']:g} on {worst['cpu_count']} CPUs)"
        )
    return out


def _busy(provenance: Mapping[str, Any]) -> bool:
    load, cpus = provenance["host_load_1m"], provenance["cpu_count"]
    return load is not None and bool(cpus) and load > cpus


def _values(values: set[str]) -> str:
    return ", ".join(sorted(values))
