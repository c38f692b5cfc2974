"""DynamicEmb against TorchRec/FBGEMM TBE and NVIDIA's dynamicemb, one test per config, four storage suites.

Run from the repository root, e.g.::

    pytest suite/benchmark_batched_dynamicemb_tables.py --preset smoke
    pytest suite/benchmark_batched_dynamicemb_tables.py --collect-only -q --preset seed

Test ids end in the config label (``embprof.labels``); ``-k`` selects by any
'='-free part of it, ``--label`` by any substring. Without ``--profile`` a
config is timed and its record appended to ``--results-file``; with it, the
config is profiled (torch, nsys, ncu) or its ncu command printed (ncu-gen).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from embprof.results.timings import BACKENDS

from .configs import PRESETS, BenchmarkConfig, RunOptions
from .errors import BaselineRequired
from .ncu import ncu_command, parse_iterations


def run_config(cfg: BenchmarkConfig, opts: RunOptions, request: pytest.FixtureRequest, results_file: Path) -> None:
    """Dispatch one config to the mode the command line asks for."""
    if opts.profile == "ncu-gen":
        print_ncu_command(cfg, request)
        return

    from . import runner
    from .records import append_record

    try:
        if opts.profile is None:
            record = runner.run_timing(cfg, opts)
            append_record(results_file, record)
            print(f"\n{summary_line(record)}")
        elif opts.profile == "torch":
            print(f"\ntrace: {runner.run_torch_profile(cfg, opts)}")
        elif opts.profile == "nsys":
            runner.run_nsys_profile(cfg, opts)
        else:
            runner.run_ncu_profile(cfg, opts)
    except BaselineRequired as exc:
        pytest.skip(str(exc))


def summary_line(record: dict) -> str:
    """The backends side by side (medians of the repeats), each other's time over dyn's (above 1:
    dyn is faster), and one line's worth of why a backend did not run."""
    others = [b for b in BACKENDS[1:] if record[f"{b}_train_ms"] is not None]
    parts = [f"{record['label']} (median of {record['repeats']} repeats)"]
    for phase in ("forward", "backward", "train", "eval"):
        dyn = record[f"dyn_{phase}_ms"]
        times = " / ".join([f"dyn {dyn:.3f}", *(f"{b} {record[f'{b}_{phase}_ms']:.3f}" for b in others)])
        ratios = ", ".join(f"{b}/dyn {record[f'{b}_{phase}_ms'] / dyn:.3g}x" for b in others)
        parts.append(f"{phase} {times} ms" + (f" ({ratios})" if ratios else ""))
    parts += [f"{b} skipped: {record[f'{b}_skip_reason']}" for b in BACKENDS[1:] if record[f"{b}_skip_reason"]]
    return " | ".join(parts)


def print_ncu_command(cfg: BenchmarkConfig, request: pytest.FixtureRequest) -> None:
    config = request.config
    iterations = parse_iterations(config.getoption("--ncu-iterations"), cfg.num_iterations)  # checked at configure
    passthrough: list[str] = []
    for option in ("--num-tables", "--feature-distribution", "--alpha", "--backends"):  # inputs and backends
        if config.getoption(option) is not None:
            passthrough += [option, str(config.getoption(option))]
    if config.getoption("--no-torchrec"):
        passthrough.append("--no-torchrec")
    command = ncu_command(
        suite=cfg.suite,
        label=cfg.label,
        preset=PRESETS[config.getoption("--preset")].name,
        iterations=iterations,
        num_iterations=cfg.num_iterations,
        kernel_regex=config.getoption("--ncu-kernel-regex"),
        passthrough=passthrough,
    )
    with request.getfixturevalue("capsys").disabled():
        print(f"\n{command}")


class TestGpu:
    """Every row in GPU memory (TBE: DEVICE)."""

    def test_dynamicemb_vs_torchrec(self, cfg, run_options, request, results_file):
        run_config(cfg, run_options, request, results_file)


class TestCaching:
    """A GPU cache of footprint x ratio rows over host storage (TBE: MANAGED_CACHING, LRU)."""

    def test_dynamicemb_vs_torchrec(self, cfg, run_options, request, results_file):
        run_config(cfg, run_options, request, results_file)


class TestNoCaching:
    """10% of the rows in GPU memory, the rest in host memory, no cache (TBE: MANAGED)."""

    def test_dynamicemb_vs_torchrec(self, cfg, run_options, request, results_file):
        run_config(cfg, run_options, request, results_file)


class TestNoHbm:
    """Every row in host memory (TBE: MANAGED)."""

    def test_dynamicemb_vs_torchrec(self, cfg, run_options, request, results_file):
        run_config(cfg, run_options, request, results_file)
