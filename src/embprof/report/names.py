"""Short names for configs in charts and tables of many configs: only what tells them apart."""

from __future__ import annotations

from collections.abc import Sequence

from embprof.labels import format_cap, parse_label


def _tokens(label: str) -> list[str] | None:
    try:
        f = parse_label(label)
    except ValueError:
        return None
    caps = "-".join(sorted({format_cap(c) for c in f.caps}))
    tokens = [f"T{f.num_tables}", f"B{f.total_batch}", f"D{f.dim}", f.optimizer, f.mode,
              f"pool={f.pooling}", f"cap={caps}"]
    return tokens + ([f"cfr={f.cache_footprint_ratio:g}"] if f.cache_footprint_ratio is not None else [])


def distinct_names(labels: Sequence[str]) -> dict[str, str]:
    """label -> the parts of it that not every label shares (``adam caching cfr=0.8``), in the
    label's order; a label that is no config label, or that nothing sets apart, keeps its name."""
    tokens = {label: _tokens(label) for label in labels}
    parsed = [t for t in tokens.values() if t is not None]
    shared = set.intersection(*(set(t) for t in parsed)) if len(parsed) > 1 else set()
    names = {}
    for label, parts in tokens.items():
        kept = [p for p in parts or () if p not in shared]
        names[label] = " ".join(kept) if parts is not None and kept and shared else label
    return names
