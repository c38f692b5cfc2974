"""Command-line options of the benchmark suite, config parametrization and ``--label`` selection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from embprof.results.timings import BACKENDS
from embprof.workflow.environment import host_memory_bytes

from .configs import (
    DEFAULT_CPU_THREADS,
    DISTRIBUTIONS,
    PRESETS,
    SUITES,
    BenchmarkConfig,
    RunOptions,
    inputs_problem,
    left_out_backends,
    suite_configs,
)
from .ncu import parse_iterations

PROFILE_MODES = ("torch", "nsys", "ncu-gen", "ncu")
NEEDS_CUDA = ("nsys", "ncu")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dynemb benchmark")
    group.addoption(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="benchmark sizes (DESIGN.md 'Sizes'); default: seed with CUDA, smoke without",
    )
    group.addoption(
        "--label",
        action="append",
        default=[],
        metavar="SUBSTR",
        help="keep configs whose label contains SUBSTR ('=' allowed, unlike -k); repeatable, ANDed",
    )
    group.addoption(
        "--num-tables",
        type=int,
        default=None,
        help="tables per config; total capacity and total batch stay fixed",
    )
    group.addoption("--num-iterations", type=int, default=None, help="iterations (sampled batches) per config")
    group.addoption(
        "--repeats",
        type=int,
        default=None,
        help="timed passes over the batches per config, after one warm-up; the record keeps each "
        "(default: the preset's, smoke 10, seed 5)",
    )
    group.addoption(
        "--cpu-threads",
        type=int,
        default=DEFAULT_CPU_THREADS,
        help=f"torch threads when the benchmark runs on the CPU (default {DEFAULT_CPU_THREADS})",
    )
    group.addoption(
        "--total-cap",
        type=int,
        default=None,
        metavar="ROWS",
        help="total rows over all tables for the caching / no_caching / no_hbm suites (default: the "
        "preset's); labels show the resulting per-table cap",
    )
    group.addoption(
        "--feature-distribution",
        choices=DISTRIBUTIONS,
        default=None,
        help="how ids are drawn (default: the preset's, pow-law)",
    )
    group.addoption("--alpha", type=float, default=None, help="pow-law / zipf exponent (default: the preset's, 1.05)")
    group.addoption(
        "--results-file",
        default=None,
        help="JSON list the timing record is appended to (default: $BENCHMARK_RESULTS_FILE, else benchmark_results.json)",
    )
    group.addoption(
        "--backends",
        default=None,
        metavar="NAMES",
        help=f"comma-separated backends to run, dyn among them (default: all of {','.join(BACKENDS)}); "
        "one left out has null results and its reason in the record",
    )
    group.addoption("--no-torchrec", action="store_true", help="skip the TorchRec/FBGEMM baseline (trc_* null)")
    group.addoption(
        "--correctness",
        action="store_true",
        help="ids in [0, cap/2), the same starting rows in every backend, forward outputs asserted equal "
        "to dyn's every iteration",
    )
    group.addoption("--profile", choices=PROFILE_MODES, default=None, help="profile instead of timing")
    group.addoption("--trace-dir", default=None, help="--profile torch: directory for <label>.kineto.json.gz")
    group.addoption(
        "--ncu-iterations",
        default="0",
        help="--profile ncu-gen: iterations ncu captures, '0,3,7' or begin:end:step (default 0)",
    )
    group.addoption(
        "--ncu-kernel-regex",
        default=None,
        help="--profile ncu-gen: emit --kernel-name 'regex:<value>' (default: every kernel in range)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Reject contradictory options up front with a one-line error (pytest exits 4)."""
    profile = config.getoption("--profile")
    iterations = config.getoption("--num-iterations")
    if iterations is not None and iterations < 1:
        raise pytest.UsageError("--num-iterations must be at least 1")
    if iterations is not None and (problem := inputs_problem(preset_name(config), iterations, host_memory_bytes())):
        raise pytest.UsageError(f"--num-iterations: {problem}")
    if config.getoption("--num-tables") is not None and config.getoption("--num-tables") < 1:
        raise pytest.UsageError("--num-tables must be at least 1")
    for option in ("--repeats", "--cpu-threads"):
        if config.getoption(option) is not None and config.getoption(option) < 1:
            raise pytest.UsageError(f"{option} must be at least 1")
    alpha = config.getoption("--alpha")
    if alpha is not None and alpha <= 0:
        raise pytest.UsageError("--alpha must be positive")
    if profile == "torch" and not config.getoption("--trace-dir"):
        raise pytest.UsageError("--profile torch needs --trace-dir DIR")
    if profile in NEEDS_CUDA and not config.option.collectonly:
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError(f"--profile {profile} needs CUDA, and torch.cuda.is_available() is False")
    if profile == "ncu-gen":
        iterations = config.getoption("--num-iterations") or PRESETS[preset_name(config)].num_iterations
        try:
            parse_iterations(config.getoption("--ncu-iterations"), iterations)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    try:
        left_out = left_out_backends(config.getoption("--backends"), config.getoption("--no-torchrec"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.getoption("--correctness"):
        if len(BACKENDS) - len(left_out) < 2:
            reasons = "; ".join(f"{b}: {why}" for b, why in left_out.items())
            raise pytest.UsageError(f"--correctness compares dyn with another backend, and none is left ({reasons})")
        if profile is not None:
            config.issue_config_time_warning(
                UserWarning(
                    f"--correctness is off under --profile {profile}: a profile run captures work, it does not check it"
                ),
                stacklevel=2,
            )
            config.option.correctness = False


def preset_name(config: pytest.Config) -> str:
    name = config.getoption("--preset")
    if name is None:
        import torch

        name = "seed" if torch.cuda.is_available() else "smoke"
        config.option.preset = name
    return name


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per config of the suite, its id the config's label."""
    if metafunc.cls is None or metafunc.cls.__name__ not in SUITES or "cfg" not in metafunc.fixturenames:
        return
    config = metafunc.config
    try:
        configs = suite_configs(
            metafunc.cls.__name__,
            PRESETS[preset_name(config)],
            num_tables=config.getoption("--num-tables"),
            num_iterations=config.getoption("--num-iterations"),
            distribution=config.getoption("--feature-distribution"),
            alpha=config.getoption("--alpha"),
            total_cap=config.getoption("--total-cap"),
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    metafunc.parametrize("cfg", configs, ids=[c.label for c in configs])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--label SUBSTR``: keep only configs whose label holds every SUBSTR."""
    wanted = config.getoption("--label")
    if not wanted:
        return
    keep, drop = [], []
    for item in items:
        cfg = getattr(getattr(item, "callspec", None), "params", {}).get("cfg")
        if isinstance(cfg, BenchmarkConfig) and not all(s in cfg.label for s in wanted):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def run_options(request: pytest.FixtureRequest) -> RunOptions:
    config = request.config
    trace_dir = config.getoption("--trace-dir")
    return RunOptions(
        profile=config.getoption("--profile"),
        correctness=config.getoption("--correctness"),
        left_out=left_out_backends(config.getoption("--backends"), config.getoption("--no-torchrec")),
        trace_dir=Path(trace_dir) if trace_dir else None,
        repeats=config.getoption("--repeats") or PRESETS[preset_name(config)].repeats,
        cpu_threads=config.getoption("--cpu-threads"),
        checkout=config.rootpath,
    )


@pytest.fixture(scope="session")
def results_file(request: pytest.FixtureRequest) -> Path:
    given = request.config.getoption("--results-file")
    return Path(given or os.environ.get("BENCHMARK_RESULTS_FILE") or "benchmark_results.json")
