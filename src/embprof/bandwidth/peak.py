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

import json
import platform
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from embprof.atomic import write_json
from embprof.bandwidth.table import BandwidthTable

if TYPE_CHECKING:
    import torch

Source = Literal["measured", "datasheet"]
FIELDS = ("device", "name", "peak_gbps", "source", "method", "date")
DEFAULT_BYTES = {"cuda": 2 << 30, "cpu": 512 << 20}


class PeakError(ValueError):
    """The peak cannot be measured here, looked up, or read back."""


@dataclass(frozen=True)
class Peak:
    device: str
    name: str
    peak_gbps: float
    source: Source
    method: str
    date: str


def device_name(device: str) -> str:
    """The name a device reports: the GPU's marketing name, or the CPU model."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def resolve_device(device: str) -> str:
    """``auto`` becomes ``cuda:0`` where CUDA works, else ``cpu``; ``cuda`` becomes ``cuda:0``."""
    if device == "auto":
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        return "cuda:0"
    if device != "cpu" and not device.startswith("cuda:"):
        raise PeakError(f"device must be auto, cpu, cuda or cuda:N, got {device!r}")
    return device


def measure_peak(device: str, nbytes: int | None = None, repeats: int = 10) -> Peak:
    """Best-of-``repeats`` copy bandwidth of ``nbytes``-sized buffers on ``device``."""
    import torch  # only measuring needs it; reading a cached peak must stay cheap

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
    return Peak(
        device=device,
        name=device_name(device),
        peak_gbps=moved / min(seconds) / 1e9,
        source="measured",
        method=(
            f"torch copy_ of a {numel * 4 / 2**20:.0f} MiB buffer on {device}{threads}: "
            f"bytes read + written over time, best of {repeats} after one warm-up"
        ),
        date=_now(),
    )


def _time_copies(src: torch.Tensor, dst: torch.Tensor, repeats: int) -> list[float]:
    dst.copy_(src)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        seconds.append(time.perf_counter() - start)
    return seconds


def _time_copies_cuda(src: torch.Tensor, dst: torch.Tensor, repeats: int) -> list[float]:
    import torch

    with torch.cuda.device(src.device):  # events record on the current device's stream
        dst.copy_(src)
        torch.cuda.synchronize()
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(repeats)
        ]
        for start, end in events:
            start.record()
            dst.copy_(src)
            end.record()
        torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 for start, end in events]


def datasheet_peak(table: BandwidthTable, device: str, name: str) -> Peak:
    """The datasheet value for ``name``; ``PeakError`` when the table has none."""
    entry = table.datasheet_peak(name)
    if entry is None:
        raise PeakError(
            f"cannot measure {name!r} here and config/bandwidth.yaml has no datasheet entry for it"
        )
    return Peak(
        device=device,
        name=name,
        peak_gbps=entry.gbps,
        source="datasheet",
        method=f"datasheet: {entry.note} (pattern {entry.pattern.pattern!r}); not measured here",
        date=_now(),
    )


def read_peak(path: Path | str) -> Peak:
    """A cached peak; ``PeakError`` for a missing, unreadable or malformed file."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise PeakError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise PeakError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(raw, dict) or set(FIELDS) - raw.keys():
        raise PeakError(f"{path}: a peak file needs the fields {', '.join(FIELDS)}")
    gbps = raw["peak_gbps"]
    if isinstance(gbps, bool) or not isinstance(gbps, int | float) or gbps <= 0:
        raise PeakError(f"{path}: peak_gbps must be a positive number, got {gbps!r}")
    if raw["source"] not in ("measured", "datasheet"):
        raise PeakError(f"{path}: source must be measured or datasheet, got {raw['source']!r}")
    return Peak(**{k: raw[k] for k in FIELDS} | {"peak_gbps": float(gbps)})


def write_peak(peak: Peak, path: Path | str) -> None:
    write_json(path, asdict(peak))


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()
