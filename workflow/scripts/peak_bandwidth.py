#!/usr/bin/env python3
"""Write results/peak_bandwidth.json: the device's peak memory bandwidth.

Measures a large copy on the device (CUDA device-to-device, or host memory on
the CPU), or, where the device the profiles ran on is not here (``--records``
names a GPU this machine lacks), takes the datasheet value from
config/bandwidth.yaml and labels it so. An existing file for the same device
is re-used unless ``--force``.

    python workflow/scripts/peak_bandwidth.py --out results/peak_bandwidth.json [--device auto]
    python workflow/scripts/peak_bandwidth.py --records results/benchmark_results.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(
    0, str(Path(__file__).resolve().parents[2] / "src")
)  # conda envs hold no project code

from embprof.bandwidth.peak import (  # noqa: E402
    Peak,
    PeakError,
    datasheet_peak,
    device_name,
    measure_peak,
    read_peak,
    resolve_device,
    write_peak,
)
from embprof.bandwidth.table import DEFAULT_TABLE, TableError, load_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("results/peak_bandwidth.json"))
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    parser.add_argument(
        "--records",
        type=Path,
        help="benchmark records (a JSON list or one object): describe the device they ran on",
    )
    parser.add_argument(
        "--table", type=Path, default=DEFAULT_TABLE, help="bandwidth table (datasheet values)"
    )
    parser.add_argument(
        "--size-mib", type=float, help="copy buffer size (default 2048 on CUDA, 512 on the CPU)"
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed copies; the best counts")
    parser.add_argument(
        "--force", action="store_true", help="measure again even if --out holds this device"
    )
    args = parser.parse_args(argv)
    try:
        peak, reused = _peak(args)
    except (PeakError, TableError, RuntimeError) as exc:
        print(f"peak_bandwidth.py: error: {exc}", file=sys.stderr)
        return 1
    if not reused:
        write_peak(peak, args.out)
    verb = "re-used" if reused else "wrote"
    print(
        f"{verb} {args.out}: {peak.name} ({peak.device}) {peak.peak_gbps:.1f} GB/s, {peak.source}",
        file=sys.stderr,
    )
    return 0


def _peak(args: argparse.Namespace) -> tuple[Peak, bool]:
    device, name = _target(args)
    if args.out.exists() and not args.force:
        try:
            cached = read_peak(args.out)
        except PeakError as exc:
            print(f"peak_bandwidth.py: ignoring unreadable cache: {exc}", file=sys.stderr)
        else:
            if (cached.device, cached.name) == (device, name):
                return cached, True
    local_cuda = torch.cuda.is_available()
    if device.startswith("cuda") and not (
        local_cuda and device_name(resolve_device("cuda")) == name
    ):
        return datasheet_peak(load_table(args.table), device, name), False
    nbytes = None if args.size_mib is None else int(args.size_mib * 2**20)
    return measure_peak(device, nbytes=nbytes, repeats=args.repeats), False


def _target(args: argparse.Namespace) -> tuple[str, str]:
    """The device to describe: the one the records ran on (when they say), else this machine's."""
    records = _records(args.records) if args.records is not None else []
    if not records:
        device = resolve_device(args.device)
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise PeakError(
                f"--device {args.device}: CUDA is not available here (use --records to name the GPU)"
            )
        return device, device_name(device)
    devices = {
        ("cuda" if str(r["device"]).startswith("cuda") else "cpu", r.get("gpu_name"))
        for r in records
    }
    if len(devices) > 1:
        raise PeakError(
            f"{args.records}: records come from several devices: {sorted(map(str, devices))}"
        )
    kind, name = devices.pop()
    if kind == "cpu":
        return "cpu", device_name("cpu")
    if not isinstance(name, str) or not name:
        raise PeakError(f"{args.records}: CUDA records without a gpu_name")
    return "cuda:0", name


def _records(path: Path) -> list[dict]:
    """Benchmark records that say where they ran (a failed config's may not)."""
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise PeakError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise PeakError(f"{path}: not JSON: {exc.msg}") from None
    records = raw if isinstance(raw, list) else [raw]
    if not all(isinstance(r, dict) for r in records):
        raise PeakError(f"{path}: expected benchmark records (JSON objects)")
    return [r for r in records if r.get("device")]


if __name__ == "__main__":
    sys.exit(main())
