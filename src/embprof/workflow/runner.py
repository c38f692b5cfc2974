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

from embprof.workflow.steps import StepRecord, run_streaming

SRC = Path(__file__).resolve().parents[2]


def benchmark_env() -> dict[str, str]:
    """This environment, with the project's src/ first on PYTHONPATH.

    The benchmark measures the code of this checkout, whether or not the
    package is installed in the interpreter (a conda env of ``--sdm conda``).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


@dataclass(frozen=True)
class StepContext:
    step: str
    label: str
    test_id: str
    log: str | None


@contextmanager
def scratch_dir(beside: str | os.PathLike[str], step: str, label: str) -> Iterator[Path]:
    """An empty folder next to ``beside`` (same file system, so a rename publishes), removed after."""
    path = Path(beside).parent / f".scratch-{step}-{label}"
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
) -> StepRecord:
    """Run ``command``; when it succeeds and ``produced`` exists, ``publish(produced)``.

    ``publish`` may raise ``ValueError`` when the file breaks the contract;
    that, a non-zero exit, or a missing file becomes a failed record and
    ``write_failed()`` leaves the declared output in its failed form.
    """
    print("+", " ".join(command), flush=True)
    returncode, tail = run_streaming(command, env=benchmark_env())
    reason = ""
    if returncode != 0:
        reason = f"benchmark exited with {returncode}"
    elif not produced.is_file():
        found = sorted(p.name for p in produced.parent.iterdir())
        reason = f"benchmark exited 0 but wrote no {produced.name} (found: {found})"
    else:
        try:
            publish(produced)
        except ValueError as exc:
            reason = str(exc)
    if reason:
        print(f"{ctx.step}: {ctx.label}: FAILED: {reason}", flush=True)
        write_failed()
    return StepRecord(
        step=ctx.step, label=ctx.label, test_id=ctx.test_id, ok=not reason,
        returncode=returncode, log=ctx.log, log_tail=tail if reason else "", reason=reason,
        command=list(command),
    )
