"""One config's bandwidth step: its per-op CSV, benchmark record and the device's peak in,
GB/s and % of peak per op out (the files of :mod:`embprof.results`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from embprof.bandwidth.achieved import achieved_bandwidth
from embprof.bandwidth.table import load_table
from embprof.errors import ContractError
from embprof.labels import sanitize_label
from embprof.results.opcalls import read_opcalls
from embprof.results.peak import Peak, read_peak
from embprof.results.records import read_records

if TYPE_CHECKING:
    import pandas as pd


def config_bandwidth(
    opcalls: str | os.PathLike[str],
    record: str | os.PathLike[str],
    label: str,
    table: str | os.PathLike[str],
    peak: str | os.PathLike[str] | None,
) -> tuple[pd.DataFrame, list[str]]:
    """The bandwidth rows of one config and notes on what was left blank."""
    bandwidth_table = load_table(table)
    frame = read_opcalls(opcalls)
    found = find_record(record, label)
    device_peak = read_peak(peak) if peak is not None else None
    mismatch = peak_mismatch(device_peak, found)
    peak_gbps = device_peak.peak_gbps if device_peak is not None and not mismatch else None
    copy_gbps = device_peak.copy_gbps if device_peak is not None and not mismatch else {}
    rows, notes = achieved_bandwidth(frame, found, bandwidth_table, peak_gbps, copy_gbps)
    return rows, [*notes, *([mismatch] if mismatch else [])]


def find_record(path: str | os.PathLike[str], label: str) -> dict[str, Any] | None:
    """The config's record; ``None`` for an empty list (the workflow's mark of a failed timing run)."""
    records = read_records(path)
    if not records:
        return None
    wanted = sanitize_label(label)
    for record in records:
        if sanitize_label(str(record.get("label", ""))) == wanted:
            return record
    raise ContractError(f"{path}: no record with label {label!r}")


def peak_mismatch(peak: Peak | None, record: dict[str, Any] | None) -> str:
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
