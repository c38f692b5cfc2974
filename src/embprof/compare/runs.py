"""A run to compare: what the comparison reads of one set of measurements.

:class:`Run` does not care where its data came from: :func:`load_run` fills one
from a results folder, :func:`embprof.compare.database.load_database_run` from a run of
a results database; both give the same object for the same run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from embprof.errors import ContractError
from embprof.results.configs import read_configs
from embprof.results.environment import read_environment
from embprof.results.layout import ResultsLayout
from embprof.results.opcalls import read_opcalls
from embprof.results.records import read_results
from embprof.results.steps import per_op_labels


@dataclass(frozen=True)
class Run:
    """One run: its benchmark records, its per-op tables by label, its environment.json.

    ``name`` is how messages and tables call it (a folder's path).
    """

    name: str
    records: list[dict[str, Any]]
    opcalls: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)


def load_opcalls(layout: ResultsLayout, labels: list[str]) -> dict[str, pd.DataFrame]:
    """The per-op CSVs of ``labels`` that the folder has (pass only configs whose files are of
    this run: ``embprof.results.steps.per_op_labels``)."""
    return {
        label: read_opcalls(layout.opcalls(label)) for label in labels if layout.opcalls(label).exists()
    }


def load_run(folder: str | os.PathLike[str], name: str | None = None) -> Run:
    """A results folder as a :class:`Run`: its ``benchmark_results.json``, per-op CSVs and
    ``environment.json`` (empty where the folder has none)."""
    root = Path(folder)
    if not root.is_dir():
        raise ContractError(f"{folder}: no such results folder")
    layout = ResultsLayout(root)
    records = read_results(layout.benchmark_results)
    environment = read_environment(layout.environment) if layout.environment.is_file() else {}
    labels = {r["label"] for r in records}
    if layout.configs.is_file():  # a config whose timing failed may still have its per-op table
        labels |= {c.label for c in read_configs(layout.configs)}
    return Run(
        name=name or str(folder),
        records=records,
        opcalls=load_opcalls(layout, per_op_labels(layout, sorted(labels))),
        environment=environment,
    )
