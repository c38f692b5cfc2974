#!/usr/bin/env python3
"""Per-op achieved memory bandwidth of one config.

Reads the config's per-op CSV (the breakdown's opcalls__<label>.csv), its
benchmark record (ids per iteration, dim, optimizer) and the device's peak,
evaluates config/bandwidth.yaml, and writes bandwidth__<label>.csv with
backend, phase, parent_stages, op, bytes_per_iter, avg_ms_per_iter,
achieved_gbps, pct_of_peak, formula. Ops without a formula keep those empty.

    python workflow/scripts/bandwidth.py results/opcalls/opcalls__LABEL.csv \\
        --record results/timing/LABEL.json --peak results/peak_bandwidth.json \\
        --out results/bandwidth/bandwidth__LABEL.csv
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(
    0, str(Path(__file__).resolve().parents[2] / "src")
)  # conda envs hold no project code

from embprof.atomic import write_csv  # noqa: E402
from embprof.bandwidth.achieved import achieved_bandwidth  # noqa: E402
from embprof.bandwidth.peak import Peak, PeakError, read_peak  # noqa: E402
from embprof.bandwidth.table import DEFAULT_TABLE, TableError, load_table  # noqa: E402
from embprof.labels import sanitize_label  # noqa: E402

PREFIX = "opcalls__"


class InputError(ValueError):
    """An input file that is missing or not what it should be."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "opcalls", type=Path, help="per-op CSV of one config (opcalls__<label>.csv)"
    )
    parser.add_argument(
        "--record", type=Path, required=True, help="benchmark record(s): a JSON object or list"
    )
    parser.add_argument(
        "--peak", type=Path, help="peak_bandwidth.json; without it pct_of_peak stays empty"
    )
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--label", help="the config's label (default: from the CSV's file name)")
    parser.add_argument(
        "--out", type=Path, help="output CSV (default: results/bandwidth/bandwidth__<label>.csv)"
    )
    args = parser.parse_args(argv)
    try:
        label = args.label or _label_from_name(args.opcalls)
        out = args.out or Path("results/bandwidth") / f"bandwidth__{sanitize_label(label)}.csv"
        table = load_table(args.table)
        opcalls = _read_opcalls(args.opcalls)
        record = _find_record(args.record, label)
        peak = read_peak(args.peak) if args.peak else None
        mismatch = _peak_mismatch(peak, record)
        peak_gbps = peak.peak_gbps if peak is not None and not mismatch else None
        frame, notes = achieved_bandwidth(opcalls, record, table, peak_gbps)
    except (InputError, TableError, PeakError) as exc:
        print(f"bandwidth.py: error: {exc}", file=sys.stderr)
        return 1
    for note in [*notes, *([mismatch] if mismatch else [])]:
        print(f"bandwidth.py: {label}: {note}", file=sys.stderr)
    write_csv(frame, out)
    covered = int(frame["achieved_gbps"].notna().sum())
    print(
        f"bandwidth.py: wrote {out}: {covered} of {len(frame)} ops with a bandwidth",
        file=sys.stderr,
    )
    return 0


def _peak_mismatch(peak: Peak | None, record: dict[str, Any] | None) -> str:
    """Why the peak is not this config's device ("" when it is, or when nothing says)."""
    if peak is None or record is None or not record.get("device"):
        return ""
    ran_on_gpu = str(record["device"]).startswith("cuda")
    if ran_on_gpu != peak.device.startswith("cuda"):
        return f"no % of peak: the peak is for {peak.device}, the config ran on {record['device']}"
    if ran_on_gpu and record.get("gpu_name") and record["gpu_name"] != peak.name:
        return (
            f"no % of peak: the peak is for {peak.name!r}, the config ran on {record['gpu_name']!r}"
        )
    return ""


def _label_from_name(path: Path) -> str:
    stem = path.name.removesuffix(".csv")
    if not stem.startswith(PREFIX) or stem == PREFIX:
        raise InputError(f"{path}: cannot tell the label from the file name; pass --label")
    return stem[len(PREFIX) :]


def _read_opcalls(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(
            path, dtype={"parent_stages": str, "op": str, "backend": str, "phase": str}
        )
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: not a per-op CSV: {str(exc).splitlines()[0]}") from None


def _find_record(path: Path, label: str) -> dict[str, Any] | None:
    """The config's record; ``None`` for an empty list (the workflow's mark of a failed timing run)."""
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
    records = raw if isinstance(raw, list) else [raw]
    if not records:
        return None
    wanted = sanitize_label(label)
    for record in records:
        if isinstance(record, dict) and sanitize_label(str(record.get("label", ""))) == wanted:
            return record
    raise InputError(f"{path}: no record with label {label!r}")




if __name__ == "__main__":
    sys.exit(main())
