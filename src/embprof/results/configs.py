"""The configs of a run (``configs.tsv``): a header, then ``test_id<TAB>label`` per config.

Written by collection, read by the workflow's input functions at every DAG
pass (so: the csv module, no pandas) and by the report.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from dataclasses import dataclass

from embprof.atomic import write_text
from embprof.errors import ContractError
from embprof.labels import parse_label

HEADER = ("test_id", "label")


@dataclass(frozen=True)
class BenchConfig:
    test_id: str
    label: str


def write_configs(path: str | os.PathLike[str], configs: Iterable[BenchConfig]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter="\t", lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows((c.test_id, c.label) for c in configs)
    write_text(path, buf.getvalue())


def read_configs(path: str | os.PathLike[str]) -> list[BenchConfig]:
    """Every row, each label checked against the label format."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t"))
    except FileNotFoundError:
        raise ContractError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ContractError(f"{path}: not a readable TSV ({exc})") from None
    if not rows or tuple(rows[0][:2]) != HEADER:
        raise ContractError(f"{path}: header must be 'test_id<TAB>label', got {rows[0] if rows else []}")
    configs = []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) < 2:
            raise ContractError(f"{path}: line {line}: expected test_id<TAB>label")
        try:
            parse_label(row[1])
        except ValueError as exc:
            raise ContractError(f"{path}: line {line}: {exc}") from None
        configs.append(BenchConfig(row[0], row[1]))
    return configs
