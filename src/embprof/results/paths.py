"""Where each file of a results folder lies (docs/DESIGN.md, "Data flow and file contracts").

The workflow's rules, their input functions, the commands and the report all
name files through one :class:`ResultsPaths`. A label made of the characters
Snakemake's wildcard allows is its own file name; any other character becomes
``_`` (:func:`embprof.labels.sanitize_label`). ``LABEL`` (or ``EC_RUN``) passed
for a label keeps the wildcard, which is how the rules get their patterns (the rules call the
workflow's one ``RESULTS``). Before issue 33: ``ResultsLayout`` in ``results/layout.py``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from embprof.errors import ContractError
from embprof.labels import is_config_range, sanitize_label

LABEL = "{label}"
# An EmbeddingCollection run's name (config/embedding_collection.yaml checks its characters).
EC_RUN = "{ec_run}"
TRACE_SUFFIX = {"nsys": ".nsys-rep", "torch": ".kineto.json.gz"}
OPCALLS_PREFIX = "opcalls__"
BANDWIDTH_PREFIX = "bandwidth__"
SUNBURST_PNG_PREFIX = "sunburst__"
SAMPLES_SUFFIX = ".samples.csv"
# Longest first: ".busy.json" before ".json".
_SUFFIXES = (".kineto.json.gz", SAMPLES_SUFFIX, ".busy.json", ".nsys-rep", ".sqlite", ".json", ".csv", ".png", ".html")
_PREFIXES = (OPCALLS_PREFIX, BANDWIDTH_PREFIX, SUNBURST_PNG_PREFIX)


def _name(label: str) -> str:
    return label if label in (LABEL, EC_RUN) else sanitize_label(label)


def opcalls_name(label: str) -> str:
    """The per-op CSV's file name, in whatever folder the breakdown writes to."""
    return f"{OPCALLS_PREFIX}{_name(label)}.csv"


def busy_name(label: str) -> str:
    """The busy-time sidecar's file name, beside its per-op CSV."""
    return f"{OPCALLS_PREFIX}{_name(label)}.busy.json"


def samples_name(label: str) -> str:
    """The per-iteration samples' file name, beside its per-op CSV."""
    return f"{OPCALLS_PREFIX}{_name(label)}{SAMPLES_SUFFIX}"


def samples_beside(opcalls: str | os.PathLike[str]) -> Path:
    """The samples file of the per-op CSV at ``opcalls`` (``opcalls__<label>.csv``), in its folder."""
    path = Path(opcalls)
    return path.with_name(path.name.removesuffix(".csv") + SAMPLES_SUFFIX)


@dataclass(frozen=True)
class ResultsPaths:
    """The files of one results folder, as paths under ``root``."""

    root: Path = Path("results")

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # What collection and each config's steps write.
    @property
    def configs(self) -> Path:
        return self.root / "configs.tsv"

    def trace(self, label: str, profiler: str) -> Path:
        return self.root / "traces" / f"{_name(label)}{TRACE_SUFFIX[profiler]}"

    def sqlite(self, label: str) -> Path:
        return self.root / "sqlite" / f"{_name(label)}.sqlite"

    @property
    def opcalls_dir(self) -> Path:
        return self.root / "opcalls"

    def opcalls(self, label: str) -> Path:
        return self.opcalls_dir / opcalls_name(label)

    def busy(self, label: str) -> Path:
        return self.opcalls_dir / busy_name(label)

    def samples(self, label: str) -> Path:
        return self.opcalls_dir / samples_name(label)

    @property
    def sunburst_dir(self) -> Path:
        return self.root / "sunburst"

    def sunburst_png(self, label: str) -> Path:
        return self.sunburst_dir / f"{_name(label)}.png"

    def sunburst_html(self, label: str) -> Path:
        return self.sunburst_dir / f"{_name(label)}.html"

    @property
    def bandwidth_dir(self) -> Path:
        return self.root / "bandwidth"

    def bandwidth(self, label: str) -> Path:
        return self.bandwidth_dir / f"{BANDWIDTH_PREFIX}{_name(label)}.csv"

    def timing(self, label: str) -> Path:
        return self.root / "timing" / f"{_name(label)}.json"

    def step(self, step: str, label: str) -> Path:
        return self.root / "steps" / step / f"{_name(label)}.json"

    @property
    def status_dir(self) -> Path:
        return self.root / "status"

    def status(self, label: str) -> Path:
        return self.status_dir / f"{_name(label)}.json"

    # What the whole run writes once.
    @property
    def benchmark_results(self) -> Path:
        return self.root / "benchmark_results.json"

    @property
    def latency_png(self) -> Path:
        return self.root / "plots" / "latency.png"

    @property
    def latency_html(self) -> Path:
        return self.root / "plots" / "latency.html"

    @property
    def bandwidth_png(self) -> Path:
        return self.root / "plots" / "bandwidth.png"

    @property
    def bandwidth_html(self) -> Path:
        return self.root / "plots" / "bandwidth.html"

    @property
    def plotly_js(self) -> Path:
        """The one plotly.js the figure steps' pages load (the report inlines its own copy)."""
        return self.root / "plotly.min.js"

    @property
    def peak(self) -> Path:
        return self.root / "peak_bandwidth.json"

    @property
    def environment(self) -> Path:
        return self.root / "environment.json"

    @property
    def database(self) -> Path:
        """The run's results as one SQLite file (embprof.results.database)."""
        return self.root / "embprof.sqlite"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def report_html(self) -> Path:
        return self.report_dir / "index.html"

    @property
    def report_summary(self) -> Path:
        return self.report_dir / "summary.md"

    # The EmbeddingCollection family (one folder of its own; ``run`` names a run of the family).
    @property
    def ec_dir(self) -> Path:
        return self.root / "embedding_collection"

    def ec_timing(self, run: str) -> Path:
        return self.ec_dir / "timing" / f"{run}.json"

    def ec_traces(self, run: str) -> Path:
        return self.ec_dir / "traces" / run

    def ec_opcalls(self, run: str) -> Path:
        return self.ec_dir / "opcalls" / run

    @property
    def ec_results(self) -> Path:
        return self.ec_dir / "results.json"

    # The settings that shaped a step's outputs (embprof.workflow.settings): per config where they differ.
    def settings(self, rule: str, label: str | None = None) -> Path:
        return self._per_job("settings", rule, label, ".json")

    # Each job's log and Snakemake's run time of it.
    def log(self, rule: str, label: str | None = None) -> Path:
        return self._per_job("logs", rule, label, ".log")

    def benchmark(self, rule: str, label: str | None = None) -> Path:
        return self._per_job("benchmarks", rule, label, ".tsv")

    def _per_job(self, folder: str, rule: str, label: str | None, suffix: str) -> Path:
        if label is None:
            return self.root / folder / f"{rule}{suffix}"
        return self.root / folder / rule / f"{_name(label)}{suffix}"


def label_from_file(path: str | os.PathLike[str]) -> str:
    """The config label a results file is named after (``opcalls__<label>.csv`` -> ``<label>``)."""
    name = Path(path).name
    stem = next((name[: -len(s)] for s in _SUFFIXES if name.endswith(s)), name)
    stem = next((stem[len(p):] for p in _PREFIXES if stem.startswith(p)), stem)
    if not is_config_range(stem):
        raise ContractError(f"{path}: cannot tell the config label from the file name; pass --label")
    return stem
