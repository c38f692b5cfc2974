"""One run of the workflow, read once: the object every view of a run renders.

A results folder (:meth:`Run.from_folder`) and a run of a results database
(:func:`embprof.results.database.read_run`, kept there so that what reads folders needs
no sqlite-utils) give the same :class:`Run`. The report, the figures,
the checks, the comparison of two runs and the database take one and never read a
results file themselves, so which configs a view shows is decided here, once:

- ``labels``: every config of the run, those of ``configs.tsv`` and those of
  ``benchmark_results.json`` (where the folder has them);
- ``shown``: the configs whose per-op files are of this run: those whose status is
  ok, or every config of a folder written before statuses existed (a failed
  config shows only its failure, whatever an earlier run left in ``opcalls/``);
- ``opcalls``, ``samples``, ``busy`` and ``bandwidth``: per shown config that has
  them, its per-op table, its per-iteration samples (from the samples file, or
  an older CSV's ``ms_by_iter``), its busy sidecar and its bandwidth table.

A folder's files are read when first asked for, a config's per-op files one
config at a time (a step that draws one config reads that config's files only);
a file that breaks its format raises :class:`~embprof.errors.ContractError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from embprof.errors import ContractError
from embprof.results.busy import BusyTime, read_busy
from embprof.results.configs import read_configs
from embprof.results.paths import ResultsPaths, busy_name
from embprof.results.peak import Peak, read_peak
from embprof.results.provenance import read_provenance
from embprof.results.records import read_results
from embprof.results.steps import read_statuses, succeeded

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")


class Lazy(Mapping[str, T]):
    """label -> value, each read when first asked for and kept."""

    def __init__(self, labels: Iterable[str], load: Callable[[str], T]) -> None:
        self._labels = list(dict.fromkeys(labels))
        self._known = set(self._labels)
        self._load = load
        self._got: dict[str, T] = {}

    def __getitem__(self, label: str) -> T:
        if label not in self._got:
            if label not in self._known:
                raise KeyError(label)
            self._got[label] = self._load(label)
        return self._got[label]

    def __iter__(self) -> Iterator[str]:
        return iter(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def __contains__(self, label: object) -> bool:
        return label in self._known


class Run:
    """One run: its configs and their statuses, benchmark records, per-op tables, samples, busy
    sidecars and bandwidth tables, environment, provenance and peak bandwidth.

    ``name`` is how messages and tables call it (a folder's path, a database run's id);
    ``paths`` is the results folder it was read from (None for a database's run, or one
    made in memory). Made in memory from its parts (``Run(name, records, opcalls, ...)``),
    each per-config mapping holds the configs given.
    """

    def __init__(
        self,
        name: str,
        records: list[dict[str, Any]] | None = None,
        opcalls: Mapping[str, pd.DataFrame] | None = None,
        environment: Mapping[str, Any] | None = None,
        *,
        samples: Mapping[str, pd.DataFrame] | None = None,
        busy: Mapping[str, BusyTime] | None = None,
        bandwidth: Mapping[str, pd.DataFrame] | None = None,
        configs: Mapping[str, str] | None = None,
        statuses: Mapping[str, Mapping[str, Any]] | None = None,
        peak: Peak | None = None,
    ) -> None:
        self.name = name
        self.paths: ResultsPaths | None = None
        parts = {
            "records": sorted(records or [], key=lambda r: r["label"]), "opcalls": dict(opcalls or {}), "environment": dict(environment or {}),
            "busy": dict(busy or {}), "bandwidth": None if bandwidth is None else dict(bandwidth),
            "configs": dict(configs or {}), "statuses": dict(statuses or {}), "peak": peak,
        }
        from embprof.results.samples import empty_samples

        given = dict(samples or {})  # a per-op table given without samples has none (an older CSV's)
        parts["samples"] = {label: given[label] if label in given else empty_samples() for label in parts["opcalls"]}
        vars(self).update(parts)  # the cached properties below, given

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str], name: str | None = None) -> Run:
        """The run of a results folder (its files read when first asked for)."""
        root = Path(folder)
        if not root.is_dir():
            raise ContractError(f"{folder}: no such results folder")
        run = cls.__new__(cls)
        run.name, run.paths = name or str(folder), ResultsPaths(root)
        return run

    @classmethod
    def from_opcalls(cls, opcalls: str | os.PathLike[str], label: str) -> Run:
        """A run of one config: the per-op CSV at ``opcalls`` and the files beside it (a sunburst of
        any breakdown's output, in a results folder or not)."""
        from embprof.results.opcalls import read_opcalls
        from embprof.results.samples import read_op_samples

        csv = Path(opcalls)
        sidecar = csv.parent / busy_name(label)
        run = cls(str(csv), configs={label: ""})
        vars(run).update(
            opcalls=Lazy([label], lambda _: read_opcalls(csv)),
            samples=Lazy([label], lambda _: read_op_samples(csv)),
            busy=Lazy([label] if sidecar.is_file() else [], lambda _: read_busy(sidecar)),
        )
        return run

    # ---- what the run holds (a folder's files read here, once) ----

    @cached_property
    def records(self) -> list[dict[str, Any]]:
        """The benchmark records (``benchmark_results.json``), by label."""
        return sorted(read_results(self._paths.benchmark_results), key=lambda r: r["label"])

    @cached_property
    def configs(self) -> dict[str, str]:
        """label -> pytest id, of ``configs.tsv`` (empty where the folder has none)."""
        path = self._paths.configs
        return {c.label: c.test_id for c in read_configs(path)} if path.is_file() else {}

    @cached_property
    def statuses(self) -> dict[str, dict[str, Any]]:
        """label -> the config's status (empty for a folder written before statuses)."""
        folder = self._paths.status_dir
        return read_statuses(folder) if folder.is_dir() else {}

    @cached_property
    def environment(self) -> dict[str, Any]:
        """``environment.json`` (empty where the folder has none)."""
        from embprof.results.environment import read_environment

        path = self._paths.environment
        return read_environment(path) if path.is_file() else {}

    @cached_property
    def peak(self) -> Peak | None:
        """The device's peak memory bandwidth (``peak_bandwidth.json``), where the run has one."""
        path = self._paths.peak
        return read_peak(path) if path.is_file() else None

    @cached_property
    def opcalls(self) -> Mapping[str, pd.DataFrame]:
        """label -> the per-op table, of every shown config that has one."""
        from embprof.results.opcalls import read_opcalls

        paths = self._paths
        return Lazy([lab for lab in self.shown if paths.opcalls(lab).is_file()],
                    lambda lab: read_opcalls(paths.opcalls(lab)))

    @cached_property
    def samples(self) -> Mapping[str, pd.DataFrame]:
        """label -> the per-op rows' samples per iteration, long (``embprof.results.samples``), of every
        config in ``opcalls`` (empty for a CSV older than samples)."""
        from embprof.results.samples import read_op_samples

        paths = self._paths
        return Lazy(self.opcalls, lambda lab: read_op_samples(paths.opcalls(lab)))

    @cached_property
    def busy(self) -> Mapping[str, BusyTime]:
        """label -> the busy sidecar, of every shown config that has one."""
        paths = self._paths
        return Lazy([lab for lab in self.shown if paths.busy(lab).is_file()], lambda lab: read_busy(paths.busy(lab)))

    @cached_property
    def bandwidth(self) -> Mapping[str, pd.DataFrame] | None:
        """label -> the bandwidth table, of every shown config that has one; None where the run has
        no bandwidth step's output at all."""
        from embprof.results.bandwidth import read_bandwidth

        paths = self._paths
        if not paths.bandwidth_dir.is_dir():
            return None
        return Lazy([lab for lab in self.shown if paths.bandwidth(lab).is_file()],
                    lambda lab: read_bandwidth(paths.bandwidth(lab)))

    # ---- what follows from it ----

    @cached_property
    def labels(self) -> list[str]:
        """Every config of the run: of ``configs.tsv`` and of the records (where the run has them), sorted."""
        return sorted(set(self.configs) | {r["label"] for r in self._records_if_any})

    @cached_property
    def shown(self) -> list[str]:
        """The configs whose per-op tables are of this run: status ok, or every config of a run
        without statuses (written before them)."""
        return succeeded(self.statuses, self.labels) if self.statuses else list(self.labels)

    @cached_property
    def failed_steps(self) -> dict[str, str]:
        """label -> the step that failed, of the run's configs whose status is not ok (statuses of
        configs no longer in the run are left out)."""
        labels = set(self.labels)
        return {lab: str(s["failed_step"]) for lab, s in self.statuses.items() if not s["ok"] and lab in labels}

    @cached_property
    def by_label(self) -> dict[str, dict[str, Any]]:
        """label -> benchmark record."""
        return {r["label"]: r for r in self.records}

    @cached_property
    def provenance(self) -> dict[str, Any]:
        """Where it was measured (``environment.json``'s provenance, every field present)."""
        return read_provenance(self.environment)

    @property
    def _records_if_any(self) -> list[dict[str, Any]]:
        """The records, or none for a folder without ``benchmark_results.json`` (yet)."""
        if "records" not in vars(self) and not self._paths.benchmark_results.is_file():
            return []
        return self.records

    @property
    def _paths(self) -> ResultsPaths:
        if self.paths is None:  # every part of a run made in memory was given
            raise AttributeError(f"{self.name}: a run made in memory holds only what it was given")
        return self.paths

    def __repr__(self) -> str:
        return f"Run({self.name!r})"
