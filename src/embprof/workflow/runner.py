"""Run one benchmark process for one config in a private scratch folder, then publish.

The benchmark writes into a scratch folder beside the final output; only a
complete, checked file is moved into place. A benchmark that exits non-zero,
or exits zero without writing what its contract promises, yields a failed
:class:`StepRecord` and the step's failure placeholder instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from embprof.atomic import write_json
from embprof.errors import ConfigError, ContractError
from embprof.results.paths import TRACE_SUFFIX
from embprof.results.records import read_results, write_results
from embprof.results.steps import StepRecord
from embprof.workflow.benchcli import nsys_profile_command, timing_command, torch_profile_command
from embprof.workflow.provenance import collect_provenance
from embprof.workflow.steps import mark_failed_output, run_streaming
from embprof.workflow.suite import RESULTS_ENV, Suite


@dataclass(frozen=True)
class StepContext:
    """One config's step; the benchmark runs where ``suite`` says (:class:`~embprof.workflow.suite.Suite`)."""

    step: str
    label: str
    test_id: str
    log: str | None
    suite: Suite


@contextmanager
def scratch_dir(beside: str | os.PathLike[str], step: str, label: str) -> Iterator[Path]:
    """An empty folder next to ``beside`` (same file system, so a rename publishes), removed after."""
    path = Path(beside).resolve().parent / f".scratch-{step}-{label}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_and_publish(
    ctx: StepContext,
    command: Sequence[str],
    produced: Path,
    publish: Callable[[Path], None],
    write_failed: Callable[[], None],
    env: dict[str, str] | None = None,
) -> StepRecord:
    """Run ``command`` (``env``: set beside the suite's environment); when it succeeds and
    ``produced`` exists, ``publish(produced)``.

    ``publish`` may raise :class:`ContractError` when the file breaks the contract;
    that, a non-zero exit, or a missing file becomes a failed record and
    ``write_failed()`` leaves the declared output in its failed form.
    """
    print("+", " ".join(command), flush=True)
    returncode, tail = run_streaming(command, env={**ctx.suite.environment(), **(env or {})}, cwd=ctx.suite.root)
    reason = ""
    if returncode != 0:
        reason = f"benchmark exited with {returncode}"
    elif not produced.is_file():
        found = sorted(p.name for p in produced.parent.iterdir())
        reason = f"benchmark exited 0 but wrote no {produced.name} (found: {found})"
    else:
        try:
            publish(produced)
        except ContractError as exc:
            reason = str(exc)
    if reason:
        print(f"{ctx.step}: {ctx.label}: FAILED: {reason}", flush=True)
        write_failed()
    return StepRecord(
        step=ctx.step, label=ctx.label, test_id=ctx.test_id, ok=not reason,
        returncode=returncode, log=ctx.log, log_tail=tail if reason else "", reason=reason,
        command=list(command),
    )


@dataclass(frozen=True)
class RunOptions:
    """How a config's benchmark runs (the config's settings and overrides, docs/workflow.md, "Configuration")."""

    preset: str
    num_iterations: int | None = None
    torchrec: bool = True
    extra_args: tuple[str, ...] = ()

    def as_kwargs(self) -> dict[str, object]:
        return dict(
            preset=self.preset, num_iterations=self.num_iterations, torchrec=self.torchrec,
            extra_args=list(self.extra_args),
        )


def profile_config(
    ctx: StepContext, options: RunOptions, profiler: str, trace: Path, nsys: str | None = None
) -> StepRecord:
    """One profiler process for one config; a crash leaves an empty trace and a failed record."""
    suffix = TRACE_SUFFIX[profiler]
    if not trace.name.endswith(suffix):
        raise ConfigError(f"--trace must end in {suffix} for profiler {profiler}")
    if profiler == "nsys" and not nsys:
        raise ConfigError("--profiler nsys needs --nsys PATH")
    with scratch_dir(trace, "profile", ctx.label) as scratch:
        produced = scratch / f"{ctx.label}{suffix}"
        if profiler == "nsys":
            command = nsys_profile_command(
                str(nsys), str(scratch / ctx.label), ctx.suite, ctx.test_id, **options.as_kwargs()
            )
        else:
            command = torch_profile_command(ctx.suite, ctx.test_id, trace_dir=str(scratch), **options.as_kwargs())
        return run_and_publish(
            ctx, command, produced,
            publish=lambda path: os.replace(path, trace),
            write_failed=lambda: mark_failed_output(trace),
        )


def time_config(
    ctx: StepContext, options: RunOptions, out: Path, repeats: int | None = None
) -> StepRecord:
    """The normal timed run of one config: ``out`` holds its one record, or ``[]`` when it failed.

    ``repeats``: timed passes (the benchmark's own default where None). This project's
    suite records its provenance and device itself; another suite's record gets, where
    it has none, the provenance taken here as its run starts, on the machine that runs
    it, and the device its one process used (DESIGN.md, "Provenance").
    """
    with scratch_dir(out, "timing", ctx.label) as scratch:
        produced = scratch / f"{ctx.label}.json"
        command = timing_command(
            ctx.suite, ctx.test_id, results_file=str(produced), repeats=repeats, **options.as_kwargs()
        )
        completion = None if ctx.suite.own else suite_completion(ctx.suite)
        return run_and_publish(
            ctx, command, produced,
            publish=lambda path: _publish_record(path, ctx.label, out, completion),
            write_failed=lambda: write_json(out, []),
            env={RESULTS_ENV: str(produced)},
        )


def suite_completion(suite: Suite) -> dict:
    """What another suite's record lacks of the contract and this step can know as the run starts:
    the device (the first CUDA device, which the suite's one process uses, else the CPU) and the
    provenance (its checkout's commit, this host's GPU and load)."""
    device = _first_cuda_device()
    return {
        "device": device or "cpu",
        "provenance": collect_provenance(
            suite.root, device=device,
            kernel_path_reason=f"{suite.file.name} is not this project's suite: it records no kernel path"),
    }


def _first_cuda_device() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return "cuda:0" if torch.cuda.is_available() else None


def _publish_record(produced: Path, label: str, out: Path, completion: dict | None = None) -> None:
    """The benchmark's file must hold exactly one record of this config; a broken one fails the step.
    ``completion``: fields added to a record that lacks them."""
    records = read_results(produced)
    if len(records) != 1:
        raise ContractError(f"{produced.name} must hold a list with one record")
    if records[0].get("label") != label:
        raise ContractError(f"record label {records[0].get('label')!r} is not {label!r}")
    for field, value in (completion or {}).items():
        records[0].setdefault(field, value)
    write_results(out, records)
