"""Benchmark configs: the presets (DESIGN.md "Sizes"), the four storage suites, and their labels.

A config is everything one test case needs to build both backends and its
inputs; its label (``embprof.labels.make_label``) is the name it carries
through every file the workflow writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from embprof.labels import make_label
from embprof.results.timings import BACKENDS

MIB_ROWS = 1 << 20
KIB_ROWS = 1 << 10
# A non-exact per-table cap is rounded down to the coarsest unit that keeps at
# least this share of the exact quotient (see per_table_cap).
CAP_ROUNDING_KEEP = 0.95
HYBRID_HBM_SHARE = 0.1  # TestNoCaching: share of each table's row bytes kept in GPU memory
OPTIMIZERS = ("adam", "sgd")
DISTRIBUTIONS = ("pow-law", "zipf", "uniform")

# Suite class name -> storage mode (labels.MODES)
SUITES = {
    "TestGpu": "gpu",
    "TestCaching": "caching",
    "TestNoCaching": "no_caching",
    "TestNoHbm": "no_hbm",
}


@dataclass(frozen=True)
class Preset:
    """Sizes shared by every config of one run; totals are over all tables."""

    name: str
    num_tables: int
    total_batch: int
    dim: int
    total_cap_hbm: int  # TestGpu: every row in GPU memory
    total_cap: int  # the other suites
    num_iterations: int
    distribution: str = "pow-law"
    alpha: float = 1.05
    max_hotness: int = 10
    cache_footprint_ratios: tuple[float, ...] = (0.8, 1.0)
    poolings: tuple[str, ...] = ("none",)
    seed: int = 42
    # Timed passes over the batches per config (--repeats). Five is the fewest whose Mann-Whitney
    # test can call a difference at alpha 0.05; ten also span the drift between two runs of a
    # shared 2-core CPU (benchmarks/README.md, "Comparisons"), and cost the smoke suite a second.
    repeats: int = 5


PRESETS = {
    # The reference system's published configuration.
    "seed": Preset(
        name="seed",
        num_tables=10,
        total_batch=1_048_570,
        dim=128,
        total_cap_hbm=16 * MIB_ROWS,
        total_cap=256 * MIB_ROWS,
        num_iterations=100,
    ),
    # A 2-core CPU runs all 10 configs, both backends, in about a minute.
    "smoke": Preset(
        name="smoke",
        num_tables=2,
        total_batch=1024,
        dim=16,
        total_cap_hbm=2 * KIB_ROWS,
        total_cap=8 * KIB_ROWS,
        num_iterations=8,
        repeats=10,
    ),
}


def per_table_cap(total_rows: int, num_tables: int) -> int:
    """Rows per table when ``total_rows`` are split over ``num_tables``.

    An exact quotient is kept. Otherwise it is rounded down to whole MiB-rows
    (2^20), else whole KiB-rows (2^10), else rows: the first unit that keeps at
    least 95% of the exact quotient. So 256M/10 = 25.6M rows -> 25M (labels
    show ``cap=25M``, as DESIGN.md's example), and 16M/10 = 1.6M rows -> 1638K
    (whole MiB would drop to 1M, a 37% loss).
    """
    if num_tables < 1 or total_rows < num_tables:
        raise ValueError(f"cannot split {total_rows} rows over {num_tables} tables")
    if total_rows % num_tables == 0:
        return total_rows // num_tables
    exact = total_rows / num_tables
    for unit in (MIB_ROWS, KIB_ROWS):
        rounded = (total_rows // num_tables) // unit * unit
        if rounded >= CAP_ROUNDING_KEEP * exact:
            return rounded
    return total_rows // num_tables


@dataclass(frozen=True)
class BenchmarkConfig:
    """One test case: a storage mode, sizes, optimizer and pooling."""

    suite: str
    mode: str
    num_tables: int
    batch_size: int  # per table
    dim: int
    optimizer: str
    pooling: str
    caps: tuple[int, ...]
    cache_footprint_ratio: float | None
    num_iterations: int
    distribution: str
    alpha: float
    max_hotness: int
    seed: int
    learning_rate: float = 0.01
    eps: float = 1e-8
    beta1: float = 0.9
    beta2: float = 0.999
    weight_decay: float = 0.0

    @property
    def label(self) -> str:
        return make_label(
            self.num_tables,
            self.batch_size,
            self.dim,
            self.optimizer,
            self.mode,
            self.pooling,
            self.caps,
            self.cache_footprint_ratio,
        )

    @property
    def caching(self) -> bool:
        return self.mode == "caching"

    @property
    def optimizer_args(self) -> dict[str, float]:
        """The optimizer's hyper-parameters, as every backend's constructor names them."""
        return {"learning_rate": self.learning_rate, "eps": self.eps, "beta1": self.beta1,
                "beta2": self.beta2, "weight_decay": self.weight_decay}

    @property
    def row_bytes(self) -> int:
        """Bytes of one stored row: fp32 embedding plus the optimizer state kept beside it."""
        state = {"sgd": 0, "adam": 2 * self.dim}[self.optimizer]
        return 4 * (self.dim + state)

    def hbm_bytes_per_table(self, distinct_per_table: list[int]) -> list[int | None]:
        """``local_hbm_for_values`` per table; ``None`` means every row in GPU memory.

        TestCaching sizes the cache to the distinct ids the run touches x ratio.
        """
        if self.mode == "gpu":
            return [None] * self.num_tables
        if self.mode == "no_hbm":
            return [0] * self.num_tables
        return [rows * self.row_bytes for rows in self.hbm_rows_per_table(distinct_per_table)]

    def hbm_rows_per_table(self, distinct_per_table: list[int]) -> list[int]:
        """Rows of each table held in GPU memory (the cache in caching mode)."""
        if self.mode == "gpu":
            return list(self.caps)
        if self.mode == "no_hbm":
            return [0] * self.num_tables
        if self.mode == "caching":
            assert self.cache_footprint_ratio is not None
            return [
                max(1, min(cap, math.ceil(n * self.cache_footprint_ratio)))
                for n, cap in zip(distinct_per_table, self.caps, strict=True)
            ]
        return [max(1, math.ceil(cap * HYBRID_HBM_SHARE)) for cap in self.caps]


def suite_configs(
    suite: str,
    preset: Preset,
    *,
    num_tables: int | None = None,
    num_iterations: int | None = None,
    distribution: str | None = None,
    alpha: float | None = None,
    total_cap: int | None = None,
) -> list[BenchmarkConfig]:
    """The configs of one suite; ``None`` keeps the preset's value.

    ``num_tables`` keeps total capacity and total batch fixed. ``total_cap``
    replaces the preset's capacity of the suites that keep rows off the GPU
    (the seed preset's 256M rows need more host memory than many GPU hosts
    have, for each backend).
    """
    mode = SUITES[suite]
    tables = num_tables if num_tables is not None else preset.num_tables
    if tables < 1:
        raise ValueError(f"--num-tables must be at least 1, got {tables}")
    if preset.total_batch < tables:
        raise ValueError(f"total batch {preset.total_batch} is smaller than {tables} tables")
    if total_cap is not None and total_cap < 1:
        raise ValueError(f"--total-cap must be at least 1 row, got {total_cap}")
    total_cap = preset.total_cap_hbm if mode == "gpu" else (total_cap or preset.total_cap)
    cap = per_table_cap(total_cap, tables)
    ratios: tuple[float | None, ...] = preset.cache_footprint_ratios if mode == "caching" else (None,)
    base = BenchmarkConfig(
        suite=suite,
        mode=mode,
        num_tables=tables,
        batch_size=preset.total_batch // tables,
        dim=preset.dim,
        optimizer=OPTIMIZERS[0],
        pooling=preset.poolings[0],
        caps=(cap,) * tables,
        cache_footprint_ratio=None,
        num_iterations=num_iterations if num_iterations is not None else preset.num_iterations,
        distribution=distribution if distribution is not None else preset.distribution,
        alpha=alpha if alpha is not None else preset.alpha,
        max_hotness=preset.max_hotness,
        seed=preset.seed,
    )
    return [
        replace(base, optimizer=opt, pooling=pool, cache_footprint_ratio=ratio)
        for opt in OPTIMIZERS
        for pool in preset.poolings
        for ratio in ratios
    ]


def preset_labels(preset: str, total_cap: int | None = None) -> list[str]:
    """Every config label of the suites at ``preset``: what collection lists, known without pytest.

    ``ValueError`` for a ``total_cap`` the preset's tables cannot share.
    """
    return [c.label for suite in SUITES for c in suite_configs(suite, PRESETS[preset], total_cap=total_cap)]


def select_problem(select: str) -> str | None:
    """Why ``select`` is no pytest ``-k`` expression (pytest's own parser says), or ``None``;
    also ``None`` where pytest is not installed (an analysis-only host collects nothing)."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:
        return None
    try:
        Expression.compile(select)
    except SyntaxError as exc:
        hint = " (-k cannot hold '='; `labels:` takes label parts with '=')" if "=" in select else ""
        return f"{select!r} is not a pytest -k expression: at column {exc.offset}: {exc.msg}{hint}"
    return None


# Every iteration's ids exist before the run (datagen): an int64 id per value, an int64 offset per sample.
ID_BYTES = OFFSET_BYTES = 8


def input_bytes(preset: str, num_iterations: int) -> int:
    """Bytes the pre-generated ids and offsets of ``num_iterations`` hold at the least (the
    generation's temporaries come on top)."""
    p = PRESETS[preset]
    ids_per_sample = max((1 + p.max_hotness) / 2 if pool != "none" else 1 for pool in p.poolings)
    return math.ceil(num_iterations * p.total_batch * (ids_per_sample * ID_BYTES + OFFSET_BYTES))


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024:
            return f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} EiB"


# Options that shape a config's label: collection and every run of a config must agree on them.
LABEL_OPTIONS = ("--preset", "--num-tables", "--total-cap")


def extra_args_problem(args: Sequence[str]) -> str | None:
    """Why ``args`` cannot be passed to the runs of some configs only, or ``None``: an option that
    shapes the labels would make the run look for a test id that collection never listed."""
    for arg in args:
        option = arg.split("=", 1)[0]
        if option in LABEL_OPTIONS:
            return (f"{option} shapes the config labels, which collection fixed for every config: "
                    "it cannot change some of them")
    return None


def inputs_problem(preset: str, num_iterations: int, memory: int | None) -> str | None:
    """Why ``num_iterations`` cannot run in ``memory`` bytes (its inputs alone exceed it), or ``None``."""
    need = input_bytes(preset, num_iterations)
    if memory is None or need <= memory:
        return None
    return (f"{num_iterations} iterations of the {preset} preset need at least {_size(need)} for "
            f"their ids, made before the run starts; this host has {_size(memory)}")


# Torch's threads on the CPU: one, as torch.utils.benchmark times by default. A shared machine
# then slows a run by its share of a core instead of stalling a thread pool at every barrier.
DEFAULT_CPU_THREADS = 1


def parse_backends(spec: str) -> tuple[str, ...]:
    """``--backends``: comma-separated names of :data:`BACKENDS`, dyn among them (the library under
    test), in the order they run; ``ValueError`` with a one-line reason otherwise."""
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in BACKENDS]
    if unknown:
        raise ValueError(f"--backends: unknown backend {unknown[0]!r} (known: {', '.join(BACKENDS)})")
    if len(set(names)) != len(names):
        raise ValueError(f"--backends: {spec!r} names a backend twice")
    if "dyn" not in names:
        raise ValueError(f"--backends: {spec!r} leaves out dyn, the library every other backend is measured against")
    return tuple(b for b in BACKENDS if b in names)


def left_out_backends(spec: str | None, no_torchrec: bool) -> dict[str, str]:
    """The backends ``--backends SPEC`` (default: all) and ``--no-torchrec`` (trc) leave out, each
    with its reason; ``ValueError`` for a bad SPEC or one that names trc beside --no-torchrec."""
    chosen = parse_backends(spec) if spec is not None else BACKENDS
    left = {b: f"not in --backends {spec}" for b in BACKENDS if b not in chosen}
    if no_torchrec:
        if spec is not None and "trc" in chosen:
            raise ValueError(f"--no-torchrec leaves out trc, which --backends {spec} asks for")
        left["trc"] = "--no-torchrec"
    return left


@dataclass(frozen=True)
class RunOptions:
    """What the command line asks of one run (beyond the config itself)."""

    profile: str | None = None  # None (timing), "torch", "nsys", "ncu"; ncu-gen never runs a config
    correctness: bool = False
    # Backends the command line leaves out, each with the reason its record keeps (the option).
    left_out: Mapping[str, str] = field(default_factory=dict)
    trace_dir: Path | None = None
    repeats: int = Preset.repeats  # conftest passes the preset's own
    cpu_threads: int = DEFAULT_CPU_THREADS
    checkout: Path = Path(".")  # where the suite lives: its git commit is the record's

    @property
    def backends(self) -> tuple[str, ...]:
        """The backends asked for, in the order they run (each still runs only where it can)."""
        return tuple(b for b in BACKENDS if b not in self.left_out)
