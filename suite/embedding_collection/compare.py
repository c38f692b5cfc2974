"""Side by side: TorchRec against dynamic tables per dedup setting, beside the published numbers.

    python -m suite.embedding_collection.compare [results/embedding_collection_results.json]

Groups records by everything but the table backend (batch, ranks, device,
sizes, optimizer, dedup); the latest record of each backend wins. Prints ms per
iteration (slowest rank) and dyn / trc, and the reference system's published
8 x H100 numbers for its default sizes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from embprof.errors import ContractError
from embprof.results.records import read_records

from .config import DEFAULT_RESULTS

# The reference system's README, 8 H100 (NVSwitch), global batch 65536, default sizes: ms per iteration.
PUBLISHED_8XH100 = {True: (14.88, 21.56), False: (23.99, 28.47)}  # dedup -> (TorchRec, dynamic)
GROUP_FIELDS = (
    "use_index_dedup", "batch_size", "world_size", "device", "gpu_name", "num_features",
    "total_rows", "multi_hot_sizes", "embedding_dim", "optimizer_type",
)  # fmt: skip


def group_key(record: dict[str, Any]) -> tuple:
    return tuple(str(record[f]) for f in GROUP_FIELDS)


def pair_up(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict | None, dict | None]]:
    """(a record of the group, its trc record, its dyn record) per group, in first-seen order."""
    groups: dict[tuple, dict[str, dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(group_key(record), {})[record["table_backend"]] = record
    return [(next(iter(g.values())), g.get("trc"), g.get("dyn")) for g in groups.values()]


def ms(record: dict[str, Any] | None) -> str:
    if record is None:
        return "not run"
    if record["status"] != "ok":
        return "skipped"
    return f"{record['total_ms']:.2f}"


def table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| dedup | batch | ranks | device | optimizer | rows | TorchRec ms | dynamic ms | dyn / trc | published 8xH100 trc / dyn |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for head, trc, dyn in pair_up(records):
        ratio = "-"
        if trc and dyn and trc["status"] == dyn["status"] == "ok":
            ratio = f"{dyn['total_ms'] / trc['total_ms']:.2f}"
        published = PUBLISHED_8XH100[head["use_index_dedup"]]
        lines.append(
            f"| {'on' if head['use_index_dedup'] else 'off'} | {head['batch_size']} | {head['world_size']} "
            f"| {head['gpu_name'] or head['device']} | {head['optimizer_type']} | {head['total_rows']} "
            f"| {ms(trc)} | {ms(dyn)} | {ratio} | {published[0]} / {published[1]} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", type=Path, default=DEFAULT_RESULTS)
    args = ap.parse_args(argv)
    try:
        records = [
            r for r in read_records(args.results) if r.get("benchmark") == "embedding_collection"
        ]
    except ContractError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 1
    if not records:
        print(f"compare: {args.results} holds no EmbeddingCollection records", file=sys.stderr)
        return 1
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
