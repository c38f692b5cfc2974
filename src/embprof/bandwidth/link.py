"""How close a config's host rows come to the host<->GPU link's limit.

A config whose dyn tables keep rows in host memory moves them over the link each
step (a cache's misses and write-backs, HYBRID and HOST rows read and stepped in
place); its record counts them per train iteration
(``embprof.results.records.HOST_TRAFFIC_FIELDS``). At the link's measured pinned
copy peak of each direction (``peak_bandwidth.json``'s ``copy_gbps``) those bytes
take at least ``link_ms``; over the config's train ms that is the share of the
step the link alone needs, the distance to the link's limit (100%: the step can
be no faster without moving fewer rows). The two directions run at once on a
full-duplex link, so the step needs the longer of the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from embprof.results.peak import Peak
from embprof.results.records import HOST_TRAFFIC_FIELDS

IN_KIND, OUT_KIND = "pinned->device", "device->pinned"  # the copies host rows move as (page-locked host memory)
LINK_COLUMNS = (
    "label", "rows_in", "rows_out", "mb_in", "mb_out", "in_gbps", "out_gbps", "link_in_ms", "link_out_ms", "link_ms",
    "train_ms", "link_share_pct",
)


def link_table(records: Iterable[Mapping[str, Any]], peak: Peak | None) -> pd.DataFrame:
    """One row per record that counts host traffic (``LINK_COLUMNS``; none for records without the fields: GPU
    configs, records from before issue 32) and ok: rows and MB (10^6 bytes) per iteration each way, the pinned
    copy peaks (GB/s, NaN without a peak file or where it measured none), the ms each direction takes at its peak,
    ``link_ms`` (the longer), dyn's train ms and ``link_ms`` as a % of it (NaN where either is missing)."""
    fields = ["label", "dyn_train_ms", *HOST_TRAFFIC_FIELDS]
    ok = [record for record in records if record.get("status", "ok") == "ok"]  # a failed run's numbers say nothing
    frame = pd.DataFrame([{f: record.get(f) for f in fields} for record in ok], columns=fields)
    numbers = frame[fields[1:]].apply(pd.to_numeric, errors="coerce").astype(float)
    counted = numbers[list(HOST_TRAFFIC_FIELDS)].notna().all(axis=1).to_numpy()
    frame, numbers = frame[counted], numbers[counted]
    rows_in, rows_out, bytes_in, bytes_out = (numbers[f].to_numpy() for f in HOST_TRAFFIC_FIELDS)
    copies = peak.copy_gbps if peak is not None else {}
    in_gbps, out_gbps = copies.get(IN_KIND, np.nan), copies.get(OUT_KIND, np.nan)
    link_in_ms, link_out_ms = bytes_in / (in_gbps * 1e6), bytes_out / (out_gbps * 1e6)  # GB/s = 1e6 bytes per ms
    link_ms = np.maximum(link_in_ms, link_out_ms)  # NaN where either direction has no peak
    train_ms = numbers["dyn_train_ms"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(train_ms > 0, 100 * link_ms / train_ms, np.nan)
    return pd.DataFrame(
        {
            "label": frame["label"].to_numpy(), "rows_in": rows_in, "rows_out": rows_out, "mb_in": bytes_in / 1e6,
            "mb_out": bytes_out / 1e6, "in_gbps": np.full(len(frame), in_gbps), "out_gbps": np.full(len(frame), out_gbps),
            "link_in_ms": link_in_ms, "link_out_ms": link_out_ms, "link_ms": link_ms, "train_ms": train_ms,
            "link_share_pct": share,
        },
        columns=list(LINK_COLUMNS),
    )
