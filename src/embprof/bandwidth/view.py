"""What the report shows of bandwidth: legend columns and one chart of % of peak.

Draws what the workflow wrote (results/bandwidth/bandwidth__<label>.csv and
results/peak_bandwidth.json, as a run holds them: :class:`embprof.results.run.Run`). Rows of one (phase, stage, op) add up the same
way the legend tables collapse them: bytes and time are summed, then divided.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from embprof.results.peak import Peak

LEGEND_KEYS = ("phase", "stage", "op")


def _collapse(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sum bytes and ms per key; GB/s and % of peak from the sums (empty where no bytes)."""
    rows = frame.assign(
        has_bytes=frame["bytes_per_iter"].notna(),
        rated_ms=frame["avg_ms_per_iter"].where(frame["achieved_gbps"].notna(), 0.0),
        rated_bytes=frame["bytes_per_iter"].where(frame["achieved_gbps"].notna(), 0.0),
        # The peak the CSV's % was taken against, recovered so each CSV stands alone.
        peak=frame["achieved_gbps"] / frame["pct_of_peak"] * 100.0,
    )
    out = rows.groupby(keys, as_index=False, sort=False).agg(
        bytes_per_iter=("bytes_per_iter", "sum"),
        has_bytes=("has_bytes", "any"),
        rated_ms=("rated_ms", "sum"),
        rated_bytes=("rated_bytes", "sum"),
        peak_gbps=("peak", "max"),
    )
    out["bytes_per_iter"] = out["bytes_per_iter"].where(out["has_bytes"])
    rated = out["rated_ms"] > 0
    out["achieved_gbps"] = np.where(
        rated, out["rated_bytes"] / out["rated_ms"].where(rated, 1.0) / 1e6, np.nan
    )
    out["pct_of_peak"] = out["achieved_gbps"] / out["peak_gbps"] * 100.0
    return out[[*keys, "bytes_per_iter", "achieved_gbps", "pct_of_peak"]]


def with_bandwidth(
    legend: pd.DataFrame, bandwidth: pd.DataFrame | None, backend: str
) -> pd.DataFrame:
    """``legend`` (columns phase, stage, op, ...) with ``achieved_gbps`` and ``pct_of_peak`` added.

    Rows without a formula, and every row when ``bandwidth`` is None, get NaN
    (shown as a dash), never a guess. Row order and count are kept.
    """
    if bandwidth is None or bandwidth.empty:
        return legend.assign(achieved_gbps=np.nan, pct_of_peak=np.nan)
    own = bandwidth[bandwidth["backend"] == backend].rename(columns={"parent_stages": "stage"})
    own = own.assign(stage=own["stage"].fillna(""))
    per_key = _collapse(own, list(LEGEND_KEYS))
    merged = legend.merge(
        per_key[[*LEGEND_KEYS, "achieved_gbps", "pct_of_peak"]],
        on=list(LEGEND_KEYS),
        how="left",
        validate="many_to_one",
    )
    return merged.set_axis(legend.index)


def per_op_pct(bandwidth_by_label: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """label, backend, op, achieved_gbps, pct_of_peak: every op with a formula, summed over its stages."""
    frames = [
        _collapse(frame[frame["bytes_per_iter"].notna()], ["backend", "op"]).assign(label=label)
        for label, frame in bandwidth_by_label.items()
        if frame["bytes_per_iter"].notna().any()
    ]
    columns = ["label", "backend", "op", "achieved_gbps", "pct_of_peak"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def pct_of_peak_figure(
    bandwidth_by_label: Mapping[str, pd.DataFrame], peak: Peak | None
) -> go.Figure:
    """A heat map: one row per config, one column per backend and op, cells in % of peak."""
    table = per_op_pct(bandwidth_by_label)
    table = table.assign(column=table["backend"] + " · " + table["op"])
    labels = sorted(table["label"].unique())
    columns = sorted(table["column"].unique(), key=lambda c: (not c.startswith("dyn"), c))
    grid = table.pivot_table(index="label", columns="column", values="pct_of_peak", aggfunc="first")
    grid = grid.reindex(index=labels, columns=columns)
    gbps = table.pivot_table(
        index="label", columns="column", values="achieved_gbps", aggfunc="first"
    )
    gbps = gbps.reindex(index=labels, columns=columns)
    text = [
        [_cell_text(p, g) for p, g in zip(prow, grow, strict=True)]
        for prow, grow in zip(grid.to_numpy(), gbps.to_numpy(), strict=True)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(),
            x=columns,
            y=labels,
            text=text,
            texttemplate="%{text}",
            customdata=gbps.to_numpy(),
            hovertemplate="%{y}<br>%{x}<br>%{z:.1f}% of peak, %{customdata:.1f} GB/s<extra></extra>",
            colorscale="Viridis",
            zmin=0,
            zmax=100,  # at or past the peak (rows served from caches) saturates; the text tells
            colorbar=dict(title="% of peak"),
            xgap=2,
            ygap=2,
        )
    )
    if peak is None:
        subtitle = "no peak measured: GB/s only"
    else:
        gbps = f"{peak.peak_gbps:,.0f}" if peak.peak_gbps >= 100 else f"{peak.peak_gbps:.1f}"
        subtitle = f"peak {gbps} GB/s, {peak.source} on {peak.name}"
    fig.update_layout(
        title=dict(
            text=f"Achieved memory bandwidth per op, % of peak ({subtitle})", x=0.01, xanchor="left"
        ),
        width=max(700, 160 * len(columns) + 420),
        height=max(320, 34 * len(labels) + 220),
        margin=dict(l=20, r=20, t=70, b=120),
        paper_bgcolor="white",
        plot_bgcolor="white",
        xaxis=dict(side="bottom", tickangle=-30),
        yaxis=dict(autorange="reversed", automargin=True),
    )
    return fig


def bandwidth_figure(bandwidth: Mapping[str, pd.DataFrame] | None, peak: Peak | None) -> go.Figure | None:
    """The chart of % of peak per config and op; None where no op has a bytes formula."""
    if bandwidth is None or per_op_pct(bandwidth).empty:
        return None
    return pct_of_peak_figure(bandwidth, peak)


def _cell_text(pct: float, gbps: float) -> str:
    if np.isnan(gbps):
        return ""
    return f"{gbps:,.1f} GB/s" if np.isnan(pct) else f"{pct:.1f}%"
