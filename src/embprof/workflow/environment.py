"""What machine and software a results folder came from (``results/environment.json``)."""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from embprof.results.provenance import merge_provenance
from embprof.versions import FBGEMM_DISTRIBUTIONS, package_version
from embprof.workflow.provenance import collect_provenance, command_output


def _first_line(command: list[str]) -> str | None:
    out, _ = command_output(command)
    lines = [line.strip() for line in (out or "").splitlines() if line.strip()]
    return lines[0] if lines else None


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
    preset: str,
    profiler: str,
    nsys: str | None,
    records: Sequence[Mapping[str, Any]] = (),
    suite_root: str | Path = ".",
) -> dict[str, Any]:
    """The fields the report shows; ``None`` where unknown.

    ``records`` are benchmark result records: they were written where the
    benchmark ran (a cluster's GPU node, say), so their device, GPU name and
    provenance win over this host's. Where no record carries provenance (every
    timing failed, or records from before provenance), it is this host's, with
    the checkout at ``suite_root``.
    """
    try:
        import torch  # here, not at module level: the Snakefile imports this package
    except ImportError:  # the analysis side of embprof installs without torch
        torch = None
    cuda = torch is not None and torch.cuda.is_available()
    env = {
        "device": "cuda" if cuda else "cpu",
        "gpu_name": torch.cuda.get_device_name(0) if cuda else None,
        "driver": None,
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
    recorded = [r["provenance"] for r in records if isinstance(r.get("provenance"), Mapping)]
    env["provenance"] = merge_provenance(recorded) if recorded else collect_provenance(suite_root)
    env["driver"] = env["provenance"]["driver"]
    return env
