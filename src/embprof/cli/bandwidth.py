"""Per-op achieved memory bandwidth of one config.

Reads the config's per-op CSV, its benchmark record (ids per iteration, dim,
optimizer) and the device's peak, evaluates the bandwidth table, and writes
bandwidth__<label>.csv with backend, phase, parent_stages, op, bytes_per_iter,
avg_ms_per_iter, achieved_gbps, pct_of_peak, formula. Ops without a formula
keep those empty. The table defaults to config/bandwidth.yaml where the
working directory has one, else the packaged default.

    embprof bandwidth results/opcalls/opcalls__LABEL.csv \
        --record results/timing/LABEL.json --peak results/peak_bandwidth.json \
        --out results/bandwidth/bandwidth__LABEL.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "achieved GB/s and %% of peak per op of one config"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("opcalls", type=Path, help="per-op CSV of one config (opcalls__<label>.csv)")
    parser.add_argument("--record", type=Path, required=True, help="benchmark record(s): a JSON object or list")
    parser.add_argument("--peak", type=Path, help="peak_bandwidth.json; without it pct_of_peak stays empty")
    parser.add_argument("--table", type=Path, help="bandwidth table (default: config/bandwidth.yaml, else the packaged one)")
    parser.add_argument("--label", help="the config's label (default: from the CSV's file name)")
    parser.add_argument("--out", type=Path, help="output CSV (default: results/bandwidth/bandwidth__<label>.csv)")


def run(args: argparse.Namespace) -> None:
    from embprof.bandwidth.step import config_bandwidth
    from embprof.defaults import BANDWIDTH_TABLE, config_file
    from embprof.results.bandwidth import write_bandwidth
    from embprof.results.paths import ResultsPaths, label_from_file

    label = args.label or label_from_file(args.opcalls)
    out = args.out or ResultsPaths().bandwidth(label)
    table = args.table or config_file(BANDWIDTH_TABLE)
    frame, notes = config_bandwidth(args.opcalls, args.record, label, table, args.peak)
    for note in notes:
        print(f"embprof bandwidth: {label}: {note}", file=sys.stderr)
    write_bandwidth(frame, out)
    covered = int(frame["achieved_gbps"].notna().sum())
    print(f"embprof bandwidth: wrote {out}: {covered} of {len(frame)} ops with a bandwidth", file=sys.stderr)
