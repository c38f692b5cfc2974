"""The benchmark suite's command lines, as its contract states them (one place builds them).

Every pytest run gets ``-o timeout=0`` (the project's per-test timeout must
not kill a long profile), ``-p no:cacheprovider`` (runs leave nothing in the
source tree) and ``-s`` (the benchmark's progress bar reaches the rule's log
while it runs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from embprof.errors import SuiteError

# The suite, relative to the checkout that holds it (its test ids are relative to the same root).
SUITE = "benchmark/benchmark_batched_dynamicemb_tables.py"
_PYTEST_OPTIONS = ("-o", "timeout=0", "-p", "no:cacheprovider")
NSYS_PROFILE = (
    "profile", "--sample=none", "--cpuctxsw=none", "--trace=cuda,nvtx",
    "--cuda-graph-trace=node", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
)


def suite_root(path: str | os.PathLike[str]) -> Path:
    """The checkout at ``path``, checked to hold the suite; commands run there."""
    root = Path(path).resolve()
    if not (root / SUITE).is_file():
        raise SuiteError(f"{root}: no benchmark suite ({SUITE}); pass --suite-root CHECKOUT")
    return root


def suite_env(root: str | os.PathLike[str]) -> dict[str, str]:
    """This environment with the checkout's src/ and root first on PYTHONPATH.

    The benchmark measures the checkout's code (``src/dynemb``), whether or not
    the package is installed in the interpreter (a conda env of ``--sdm conda``).
    """
    env = dict(os.environ)
    parts = (str(Path(root, "src").resolve()), str(Path(root).resolve()), env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
    return env


def _pytest(python: str | None) -> list[str]:
    return [python or sys.executable, "-m", "pytest"]


def _run_options(
    preset: str, num_iterations: int | None, torchrec: bool, extra_args: Sequence[str]
) -> list[str]:
    options = ["--preset", preset, "-s", *_PYTEST_OPTIONS]
    if num_iterations is not None:
        options += ["--num-iterations", str(num_iterations)]
    if not torchrec:
        options.append("--no-torchrec")
    return options + list(extra_args)


def collect_command(
    preset: str, select: str | None, suite: str = SUITE, python: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``extra_args`` are the size options that shape labels (e.g. ``--total-cap``): every run repeats them."""
    command = [*_pytest(python), suite, "--collect-only", "-q", "--preset", preset, *_PYTEST_OPTIONS]
    if select:
        command += ["-k", select]
    return command + list(extra_args)


def timing_command(
    test_id: str, preset: str, results_file: str, num_iterations: int | None = None,
    torchrec: bool = True, extra_args: Sequence[str] = (), python: str | None = None,
    repeats: int | None = None,
) -> list[str]:
    """``repeats``: timed passes over the batches (the suite's default where None)."""
    return [
        *_pytest(python), test_id, *_run_options(preset, num_iterations, torchrec, extra_args),
        *(["--repeats", str(repeats)] if repeats is not None else []),
        "--results-file", results_file,
    ]


def torch_profile_command(
    test_id: str, preset: str, trace_dir: str, num_iterations: int | None = None,
    torchrec: bool = True, extra_args: Sequence[str] = (), python: str | None = None,
) -> list[str]:
    return [
        *_pytest(python), test_id, *_run_options(preset, num_iterations, torchrec, extra_args),
        "--profile", "torch", "--trace-dir", trace_dir,
    ]


def nsys_profile_command(
    nsys: str, output_prefix: str, test_id: str, preset: str, num_iterations: int | None = None,
    torchrec: bool = True, extra_args: Sequence[str] = (), python: str | None = None,
) -> list[str]:
    return [
        nsys, *NSYS_PROFILE, "-o", output_prefix, "--force-overwrite", "true",
        *_pytest(python), test_id, *_run_options(preset, num_iterations, torchrec, extra_args),
        "--profile", "nsys",
    ]
