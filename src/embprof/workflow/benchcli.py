"""The benchmark suite's command lines, as its contract states them (one place builds them).

Every pytest run gets ``-o timeout=0`` (the project's per-test timeout must
not kill a long profile), ``-p no:cacheprovider`` (runs leave nothing in the
source tree) and ``-s`` (the benchmark's progress bar reaches the rule's log
while it runs), then the suite's own ``suite_args``. Options only this
project's suite takes (``--preset``, ``--repeats``, ``--results-file``, the
torch profiler's ``--trace-dir``) go to it alone (:class:`~embprof.workflow.suite.Suite`).
"""

from __future__ import annotations

from collections.abc import Sequence

from embprof.errors import SuiteError
from embprof.workflow.suite import Suite

_PYTEST_OPTIONS = ("-o", "timeout=0", "-p", "no:cacheprovider")
NSYS_PROFILE = (
    "profile", "--sample=none", "--cpuctxsw=none", "--trace=cuda,nvtx",
    "--cuda-graph-trace=node", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
)


def _run_options(
    suite: Suite, preset: str, num_iterations: int | None, torchrec: bool, extra_args: Sequence[str]
) -> list[str]:
    options = (["--preset", preset] if suite.own else []) + ["-s", *_PYTEST_OPTIONS, *suite.args]
    if num_iterations is not None:
        options += ["--num-iterations", str(num_iterations)]
    if not torchrec:
        options.append("--no-torchrec")
    return options + list(extra_args)


def collect_command(suite: Suite, preset: str, select: str | None, extra_args: Sequence[str] = ()) -> list[str]:
    """``extra_args`` are the size options that shape labels (e.g. ``--total-cap``): every run repeats them."""
    command = [*suite.pytest(launched=False), suite.target, "--collect-only", "-q"]
    command += (["--preset", preset] if suite.own else []) + [*_PYTEST_OPTIONS, *suite.args]
    if select:
        command += ["-k", select]
    return command + list(extra_args)


def timing_command(
    suite: Suite, test_id: str, preset: str, results_file: str, num_iterations: int | None = None,
    torchrec: bool = True, extra_args: Sequence[str] = (), repeats: int | None = None,
) -> list[str]:
    """``repeats``: timed passes over the batches (the suite's default where None; only this
    project's suite takes them). Another suite names its results file in the environment
    (:data:`~embprof.workflow.suite.RESULTS_ENV`, which the step sets for every suite)."""
    if repeats is not None and not suite.own:
        raise SuiteError(f"{suite.file.name} takes no --repeats (only this project's suite repeats its timed passes)")
    command = [*suite.pytest(), test_id, *_run_options(suite, preset, num_iterations, torchrec, extra_args)]
    if suite.own:
        command += [*(["--repeats", str(repeats)] if repeats is not None else []), "--results-file", results_file]
    return command


def torch_profile_command(
    suite: Suite, test_id: str, preset: str, trace_dir: str, num_iterations: int | None = None,
    torchrec: bool = True, extra_args: Sequence[str] = (),
) -> list[str]:
    if not suite.own:
        raise SuiteError(f"{suite.file.name}: the torch profiler needs this project's suite "
                         "(another suite's --profile torch writes traces of another layout); use profiler nsys")
    return [
        *suite.pytest(), test_id, *_run_options(suite, preset, num_iterations, torchrec, extra_args),
        "--profile", "torch", "--trace-dir", trace_dir,
    ]


def nsys_profile_command(
    nsys: str, output_prefix: str, suite: Suite, test_id: str, preset: str, num_iterations: int | None = None,
    torchrec: bool = True, extra_args: Sequence[str] = (),
) -> list[str]:
    return [
        nsys, *NSYS_PROFILE, "-o", output_prefix, "--force-overwrite", "true",
        *suite.pytest(), test_id, *_run_options(suite, preset, num_iterations, torchrec, extra_args),
        "--profile", "nsys",
    ]
