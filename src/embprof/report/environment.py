"""The environment a report's numbers come from, as rows for people to read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from embprof.pages.legend import CPU_STAND_IN_NOTE
from embprof.results.busy import BusyTime
from embprof.results.provenance import read_provenance

__all__ = ["CPU_STAND_IN_NOTE", "cpu_stand_in", "environment_rows", "one_line"]
FIELDS = (
    ("device", "device"),
    ("gpu_name", "GPU"),
    ("driver", "driver"),
    ("cpu_name", "CPU"),
    ("profiler", "profiler"),
    ("nsys_version", "Nsight Systems"),
    ("preset", "preset"),
    ("python", "Python"),
    ("torch", "torch"),
    ("fbgemm_gpu", "fbgemm_gpu"),
    ("torchrec", "torchrec"),
    ("snakemake", "Snakemake"),
    ("date", "date"),
    ("hostname", "host"),
)
PROVENANCE_FIELDS = (
    ("git_commit", "git commit"),
    ("git_dirty", "uncommitted changes"),
    ("kernel_path", "dynemb kernels"),
    ("triton", "Triton"),
    ("cuda", "CUDA (torch)"),
    ("gpu_clocks", "GPU clocks at start (MHz)"),
    ("host_load_1m", "host load at start (1 min, highest)"),
    ("cpu_count", "CPUs"),
    ("torch_threads", "torch threads"),
    ("started_at", "first run started"),
)
UNKNOWN = "unknown"


def environment_rows(env: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Known fields in a fixed order, the provenance (a null with its reason), then any extra
    ones by name; null shows as unknown."""
    known = [(title, _text(env.get(key))) for key, title in FIELDS]
    provenance = read_provenance(env)
    reasons = provenance["null_reasons"]
    known += [
        (title, _text(provenance[key]) if provenance[key] is not None else f"{UNKNOWN} ({reasons[key]})")
        for key, title in PROVENANCE_FIELDS
    ]
    skip = {*dict(FIELDS), "provenance"}
    extra = [(key, _text(env[key])) for key in sorted(env) if key not in skip]
    return known + extra


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items())
    return UNKNOWN if value is None or value == "" else str(value)


def cpu_stand_in(env: Mapping[str, Any], busy: Iterable[BusyTime | None]) -> bool:
    """Whether op times are CPU leaf-operator times rather than GPU kernel times.

    The breakdown's sidecar says so directly; without one, a torch-profiler run
    on a machine without a GPU name means the same.
    """
    known = [b for b in busy if b is not None]
    if known:
        return any(b.cpu_leaf_ops for b in known)
    device = str(env.get("device") or "").lower()
    return env.get("profiler") == "torch" and (env.get("gpu_name") is None or device == "cpu")


def one_line(env: Mapping[str, Any]) -> str:
    """Device, profiler, preset, library versions and date for a summary's first line."""
    device = env.get("gpu_name") or env.get("cpu_name") or env.get("device") or UNKNOWN
    parts = [
        f"device: {device}",
        f"profiler: {_text(env.get('profiler'))}",
        f"preset: {_text(env.get('preset'))}",
        f"torch {_text(env.get('torch'))}",
        f"fbgemm_gpu {_text(env.get('fbgemm_gpu'))}",
        f"torchrec {_text(env.get('torchrec'))}",
        f"date: {_text(env.get('date'))}",
    ]
    return " · ".join(parts)
