"""Config labels: the one name a benchmark config carries through every file.

Format (DESIGN.md, "Config labels"):
``T{tables}_totalB{batch*tables}_D{dim}_{optimizer}_{mode}_pool={pooling}_cap={caps}[_cfr={ratio}]``
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MODES = ("gpu", "caching", "no_caching", "no_hbm")
# ASCII digits: the breakdown matches the same pattern in Arrow (RE2), whose \d is ASCII only.
CONFIG_RANGE = re.compile(r"^T[0-9]+_totalB")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]")
_LABEL = re.compile(
    r"^T(?P<tables>\d+)_totalB(?P<total_batch>\d+)_D(?P<dim>\d+)_(?P<optimizer>[a-z0-9_]+?)"
    r"_(?P<mode>" + "|".join(sorted(MODES, key=len, reverse=True)) + r")"
    r"_pool=(?P<pooling>[a-z]+)_cap=(?P<caps>[0-9KM-]+)(?:_cfr=(?P<cfr>[0-9.]+))?$"
)


def format_cap(rows: int) -> str:
    """``NM`` when divisible by 2**20, ``NK`` when divisible by 1024, else the integer."""
    if rows > 0 and rows % (1 << 20) == 0:
        return f"{rows >> 20}M"
    if rows > 0 and rows % 1024 == 0:
        return f"{rows >> 10}K"
    return str(rows)


def parse_cap(token: str) -> int:
    if token.endswith("M"):
        return int(token[:-1]) << 20
    if token.endswith("K"):
        return int(token[:-1]) << 10
    return int(token)


def cap_token(caps: Sequence[int]) -> str:
    """The caps as a label writes them: one token when the tables' caps are equal, else ``-``-joined."""
    tokens = [format_cap(int(c)) for c in caps]
    return tokens[0] if len(set(tokens)) == 1 else "-".join(tokens)


def make_label(
    num_tables: int,
    batch_size: int,
    dim: int,
    optimizer: str,
    mode: str,
    pooling: str,
    caps: Sequence[int],
    cache_footprint_ratio: float | None = None,
) -> str:
    """The label of one config; ``batch_size`` is per table, the label shows the total."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if len(caps) != num_tables:
        raise ValueError(f"need one cap per table ({num_tables}), got {len(caps)}")
    label = (
        f"T{num_tables}_totalB{batch_size * num_tables}_D{dim}_{optimizer.lower()}_{mode}"
        f"_pool={pooling.lower()}_cap={cap_token(caps)}"
    )
    if cache_footprint_ratio is not None:
        label += f"_cfr={float(cache_footprint_ratio)!r}"
    return label


@dataclass(frozen=True)
class LabelFields:
    num_tables: int
    total_batch: int
    dim: int
    optimizer: str
    mode: str
    pooling: str
    caps: tuple[int, ...]
    cache_footprint_ratio: float | None


def parse_label(label: str) -> LabelFields:
    """Inverse of :func:`make_label`; ``ValueError`` for anything else."""
    m = _LABEL.match(label)
    if m is None:
        raise ValueError(f"not a config label: {label!r}")
    tables = int(m["tables"])
    caps = tuple(parse_cap(t) for t in m["caps"].split("-"))
    if len(caps) == 1:
        caps = caps * tables
    return LabelFields(
        num_tables=tables,
        total_batch=int(m["total_batch"]),
        dim=int(m["dim"]),
        optimizer=m["optimizer"],
        mode=m["mode"],
        pooling=m["pooling"],
        caps=caps,
        cache_footprint_ratio=float(m["cfr"]) if m["cfr"] else None,
    )


def is_config_range(name: str) -> bool:
    return CONFIG_RANGE.match(name) is not None


def sanitize_label(label: str) -> str:
    """A label made safe for a file name: every character outside ``[A-Za-z0-9_.=-]`` becomes ``_``."""
    return _UNSAFE.sub("_", label)
