"""Write peak_bandwidth.json: the device's peak memory bandwidth.

Measures a large copy on the device (CUDA device-to-device, or host memory on
the CPU), or, where the device the profiles ran on is not here (``--records``
names a GPU this machine lacks), takes the datasheet value from the bandwidth
table and labels it so. An existing file for the same device is re-used
unless ``--force``. Measuring needs torch (``pip install 'embprof[bench]'``).

    embprof peak-bandwidth --out results/peak_bandwidth.json [--device auto]
    embprof peak-bandwidth --records results/benchmark_results.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from embprof.results.peak import Peak

HELP = "measure (or look up) the device's peak memory bandwidth"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("results/peak_bandwidth.json"))
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    parser.add_argument("--records", type=Path, nargs="+",
                        help="benchmark records (files of a JSON list or one object; the timing files or "
                             "benchmark_results.json): describe the device they ran on")
    parser.add_argument("--table", type=Path,
                        help="bandwidth table for datasheet values (default: config/bandwidth.yaml, else the packaged one)")
    parser.add_argument("--size-mib", type=float, help="copy buffer size (default 2048 on CUDA, 512 on the CPU)")
    parser.add_argument("--repeats", type=int, default=10, help="timed copies; the best counts")
    parser.add_argument("--force", action="store_true", help="measure again even if --out holds this device")


def run(args: argparse.Namespace) -> None:
    from embprof.bandwidth.peak import peak_of, target_device
    from embprof.bandwidth.table import load_table
    from embprof.defaults import BANDWIDTH_TABLE, config_file
    from embprof.errors import ContractError
    from embprof.results.peak import read_peak, write_peak
    from embprof.results.records import read_records

    records = [record for path in args.records or () for record in read_records(path)]
    device, name = target_device(records, args.device, ", ".join(map(str, args.records or ())))
    if args.out.exists() and not args.force:
        try:
            cached = read_peak(args.out)
        except ContractError as exc:
            print(f"embprof peak-bandwidth: ignoring unreadable cache: {exc}", file=sys.stderr)
        else:
            # A GPU's peak from before copies were measured is measured again, for its copy peaks.
            stale = device.startswith("cuda") and cached.source == "measured" and not cached.copy_gbps
            if (cached.device, cached.name) == (device, name) and not stale:
                _report("re-used", args.out, cached)
                return
    nbytes = None if args.size_mib is None else int(args.size_mib * 2**20)
    table = load_table(args.table or config_file(BANDWIDTH_TABLE))
    peak = peak_of(device, name, table, nbytes=nbytes, repeats=args.repeats)
    write_peak(peak, args.out)
    _report("wrote", args.out, peak)


def _report(verb: str, out: Path, peak: Peak) -> None:
    print(f"embprof peak-bandwidth: {verb} {out}: {peak.name} ({peak.device}) "
          f"{peak.peak_gbps:.1f} GB/s, {peak.source}", file=sys.stderr)
