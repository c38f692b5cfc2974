"""What machine and software a results folder came from (``results/environment.json``)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from embprof.versions import FBGEMM_DISTRIBUTIONS, package_version


def _first_line(command: list[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return lines[0] if done.returncode == 0 and lines else None


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_memory_bytes() -> int | None:
    """This machine's physical memory; ``None`` where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def describe_environment(
    preset: str, profiler: str, nsys: str | None, records: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The fields the report shows; ``None`` where unknown.

    ``records`` are benchmark result records: they were written where the
    benchmark ran (a cluster's GPU node, say), so their device and GPU name
    win over this host's.
    """
    try:
        import torch  # here, not at module level: the Snakefile imports this package
    except ImportError:  # the analysis side of embprof installs without torch
        torch = None
    cuda = torch is not None and torch.cuda.is_available()
    env = {
        "device": "cuda" if cuda else "cpu",
        "gpu_name": torch.cuda.get_device_name(0) if cuda else None,
        "driver": _first_line(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        ) if cuda else None,
        "cpu_name": cpu_name(),
        "python": platform.python_version(),
        "torch": torch.__version__ if torch is not None else None,
        "fbgemm_gpu": package_version(*FBGEMM_DISTRIBUTIONS),
        "torchrec": package_version("torchrec"),
        "snakemake": package_version("snakemake"),
        "profiler": profiler,
        "nsys_version": _first_line([nsys, "--version"]) if nsys else None,
        "preset": preset,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
    }
    measured = next((r for r in records if r.get("device")), None)
    if measured is not None:
        env["device"] = "cuda" if str(measured["device"]).startswith("cuda") else "cpu"
        env["gpu_name"] = measured.get("gpu_name") or env["gpu_name"]
    return env
