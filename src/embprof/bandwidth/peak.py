"""The device's peak memory bandwidth: measured once per device, cached as JSON.

Peak is what a large copy achieves: bytes read plus bytes written over the
time of the best of several repeats (the STREAM "copy" convention). On CUDA it
is a device-to-device ``copy_`` timed with CUDA events; on the CPU a host
``copy_`` over torch's intra-op threads, timed with the wall clock. Buffers are
far larger than any cache, and one untimed copy first touches every page.
A datasheet value stands in only where the device the profiles ran on is not
here to measure, and says so in ``source``.
"""

from __future__ import annotations

import platform
import time
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

from embprof.bandwidth.table import BandwidthTable
from embprof.errors import PeakError
from embprof.results.peak import Peak
from embprof.workflow.environment import cpu_name

if TYPE_CHECKING:
    import torch

DEFAULT_BYTES = {"cuda": 2 << 30, "cpu": 512 << 20}
# Host <-> device copies are timed on buffers this size (and never larger than the main one).
COPY_BYTES = 256 << 20


def device_name(device: str) -> str:
    """The name a device reports: the GPU's marketing name, or the CPU model."""
    if device.startswith("cuda"):
        torch = _torch()

        return torch.cuda.get_device_name(torch.device(device))
    return cpu_name() or platform.machine() or "cpu"


def resolve_device(device: str) -> str:
    """``auto`` becomes ``cuda:0`` where CUDA works, else ``cpu``; ``cuda`` becomes ``cuda:0``."""
    if device == "auto":
        torch = _torch()

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        return "cuda:0"
    if device != "cpu" and not device.startswith("cuda:"):
        raise PeakError(f"device must be auto, cpu, cuda or cuda:N, got {device!r}")
    return device


def measure_peak(device: str, nbytes: int | None = None, repeats: int = 10) -> Peak:
    """Best-of-``repeats`` copy bandwidth of ``nbytes``-sized buffers on ``device``."""
    torch = _torch()  # only measuring needs it; reading a cached peak must stay cheap

    device = resolve_device(device)
    kind = "cuda" if device.startswith("cuda") else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        raise PeakError(f"cannot measure {device}: CUDA is not available here")
    if repeats < 1:
        raise PeakError(f"repeats must be at least 1, got {repeats}")
    nbytes = DEFAULT_BYTES[kind] if nbytes is None else int(nbytes)
    numel = nbytes // 4
    if numel < 1:
        raise PeakError(f"buffer size must be at least 4 bytes, got {nbytes}")
    src = torch.ones(numel, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    seconds = (
        _time_copies(src, dst, repeats) if kind == "cpu" else _time_copies_cuda(src, dst, repeats)
    )
    moved = 2 * numel * 4
    count = torch.get_num_threads()
    threads = f", {count} thread{'s' if count > 1 else ''}" if kind == "cpu" else ""
    copies: dict[str, float] = {}
    method = (
        f"torch copy_ of a {numel * 4 / 2**20:.0f} MiB buffer on {device}{threads}: "
        f"bytes read + written over time, best of {repeats} after one warm-up"
    )
    if kind == "cuda":
        copy_numel = min(numel * 4, COPY_BYTES)
        copies = {"device->device": numel * 4 / min(seconds) / 1e9} | _time_host_copies(
            device, copy_numel, repeats
        )
        method += (
            f"; copies: bytes copied over time, best of {repeats}, host <-> device on "
            f"{copy_numel / 2**20:.0f} MiB pinned and pageable buffers"
        )
    return Peak(
        device=device,
        name=device_name(device),
        peak_gbps=moved / min(seconds) / 1e9,
        source="measured",
        method=method,
        date=_now(),
        copy_gbps=copies,
    )


def _time_copies(src: torch.Tensor, dst: torch.Tensor, repeats: int) -> list[float]:
    dst.copy_(src)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        seconds.append(time.perf_counter() - start)
    return seconds


def _time_copies_cuda(
    src: torch.Tensor, dst: torch.Tensor, repeats: int, non_blocking: bool = False
) -> list[float]:
    """Seconds of each of ``repeats`` copies, by CUDA events on the GPU's stream (the GPU side of
    ``src`` and ``dst``; a pinned host buffer copies asynchronously with ``non_blocking``)."""
    torch = _torch()

    gpu = src.device if src.device.type == "cuda" else dst.device
    with torch.cuda.device(gpu):  # events record on the current device's stream
        dst.copy_(src, non_blocking=non_blocking)
        torch.cuda.synchronize()
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(repeats)
        ]
        for start, end in events:
            start.record()
            dst.copy_(src, non_blocking=non_blocking)
            end.record()
        torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 for start, end in events]


def _time_host_copies(device: str, nbytes: int, repeats: int) -> dict[str, float]:
    """Bytes copied per second between host memory (pinned and pageable) and ``device``, each way:
    the peaks a trace's copies of those kinds are rated against."""
    torch = _torch()

    on_device = torch.empty(nbytes, dtype=torch.uint8, device=device)
    gbps = {}
    for host_kind, pinned in (("pinned", True), ("pageable", False)):
        host = torch.ones(nbytes, dtype=torch.uint8, pin_memory=pinned)
        for kind, dst, src in ((f"{host_kind}->device", on_device, host), (f"device->{host_kind}", host, on_device)):
            seconds = _time_copies_cuda(src, dst, repeats, non_blocking=pinned)
            gbps[kind] = nbytes / min(seconds) / 1e9
    return gbps


def datasheet_peak(table: BandwidthTable, device: str, name: str) -> Peak:
    """The datasheet value for ``name``; ``PeakError`` when the table has none."""
    entry = table.datasheet_peak(name)
    if entry is None:
        raise PeakError(
            f"cannot measure {name!r} here and the bandwidth table has no datasheet entry for it"
        )
    return Peak(
        device=device,
        name=name,
        peak_gbps=entry.gbps,
        source="datasheet",
        method=f"datasheet: {entry.note} (pattern {entry.pattern.pattern!r}); not measured here",
        date=_now(),
    )


def target_device(records: list[dict[str, Any]], device: str, where: str) -> tuple[str, str]:
    """The device to describe: the one ``records`` ran on (when they say), else this machine's
    ``device``; ``where`` names the records in errors."""
    records = [r for r in records if r.get("device")]  # a failed config's record may not say
    if not records:
        device = resolve_device(device)
        if device.startswith("cuda") and not _cuda_available():
            raise PeakError(
                f"--device {device}: CUDA is not available here (use --records to name the GPU)"
            )
        return device, device_name(device)
    devices = {
        ("cuda" if str(r["device"]).startswith("cuda") else "cpu", r.get("gpu_name"))
        for r in records
    }
    if len(devices) > 1:
        raise PeakError(f"{where}: records come from several devices: {sorted(map(str, devices))}")
    kind, name = devices.pop()
    if kind == "cpu":
        return "cpu", device_name("cpu")
    if not isinstance(name, str) or not name:
        raise PeakError(f"{where}: CUDA records without a gpu_name")
    return "cuda:0", name


def peak_of(
    device: str, name: str, table: BandwidthTable, nbytes: int | None = None, repeats: int = 10
) -> Peak:
    """Measured where the device is here; its datasheet value where it is a GPU this machine lacks."""
    if device.startswith("cuda") and not (
        _cuda_available() and device_name(resolve_device("cuda")) == name
    ):
        return datasheet_peak(table, device, name)
    return measure_peak(device, nbytes=nbytes, repeats=repeats)


def _cuda_available() -> bool:
    try:
        return _torch().cuda.is_available()
    except PeakError:
        return False


def _torch() -> ModuleType:
    """torch, which only measuring needs: the analysis side of embprof installs without it."""
    try:
        import torch
    except ImportError:
        raise PeakError("measuring needs torch: pip install 'embprof[bench]'") from None
    return torch


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()
