"""Which profiler runs: ``auto`` means nsys when an nsys binary and a CUDA GPU are present.

Resolved when the Snakefile is parsed, so it must be cheap: no torch import.
A GPU is "present" when the NVIDIA driver lists one under /proc and
``CUDA_VISIBLE_DEVICES`` does not hide them all. The resolution is pinned in
the environment (``EMBPROF_PROFILER``) so that jobs Snakemake starts elsewhere
(a SLURM node re-parses the Snakefile) name the same trace files as the
host that planned them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from embprof.errors import ConfigError

PROFILERS = ("auto", "nsys", "torch")
PIN_VARIABLE = "EMBPROF_PROFILER"
_NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def find_nsys(configured: str | None) -> str | None:
    """The nsys binary: the configured path (which must exist), else ``nsys`` on PATH."""
    if configured:
        path = Path(configured).expanduser()
        if path.is_dir():
            path = path / "nsys"
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(f"config nsys: {configured!r} is not an executable nsys binary")
        return str(path.resolve())
    return shutil.which("nsys")


def cuda_gpu_present(gpus_dir: Path = _NVIDIA_GPUS) -> bool:
    """A GPU the driver knows of and ``CUDA_VISIBLE_DEVICES`` does not hide."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    try:
        return any(gpus_dir.iterdir())
    except OSError:
        return False


def resolve_profiler(requested: str, nsys: str | None) -> str:
    """``nsys`` or ``torch`` for the config's ``profiler:`` and the nsys binary found (or None).

    An explicit ``nsys`` stands even when this host has no nsys: a cluster's
    submitting host often lacks it, and the profile job reports a missing
    binary where it runs.
    """
    pinned = os.environ.get(PIN_VARIABLE)
    if requested == "auto" and pinned in ("nsys", "torch"):
        return pinned
    if requested not in PROFILERS:
        raise ConfigError(f"profiler must be one of {PROFILERS}, got {requested!r}")
    if requested == "auto":
        return "nsys" if nsys is not None and cuda_gpu_present() else "torch"
    return requested
