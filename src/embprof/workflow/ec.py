"""The EmbeddingCollection family's runs (issue 9) as the workflow runs them, one ``embprof`` call a rule.

``embprof ec-run`` starts one run of the family's launcher
(``suite/benchmark_embedding_collection.sh``: one torchrun, every rank) for a timing
record or a profile, and puts its output in place whole once the launcher has succeeded:
a run that fails leaves the previous output as it was. ``embprof ec-breakdown`` attributes
every rank's trace of a profiled run to one per-op CSV, or keeps the run's skip note
where it could not be profiled. Until issue 33 the rules did this in shell (``rm``,
``mv``, ``ls``). The family (``config/embedding_collection.yaml``) is read by the suite's
own ``suite/embedding_collection/family.py``, loaded from the checkout's file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from embprof.errors import ConfigError, ContractError, EmbprofError
from embprof.workflow.checkout import EC_FAMILY, suite_module

LAUNCHER = "suite/benchmark_embedding_collection.sh"
FAMILY_CONFIG = Path("config", "embedding_collection.yaml")
TRACES = "*.kineto.json.gz"  # every rank's torch trace of a profiled run
SKIP_NOTES = "*.skipped.txt"  # what a run that could not be profiled leaves instead


def load_family(checkout: str | os.PathLike[str]) -> Any:
    """The family of the working directory's ``config/embedding_collection.yaml``, else the checkout's
    (``suite.embedding_collection.family.Family``); :class:`ConfigError` names a malformed key."""
    module = suite_module(checkout, EC_FAMILY)
    path = FAMILY_CONFIG if FAMILY_CONFIG.is_file() else Path(checkout) / FAMILY_CONFIG
    try:
        return module.load_family(path)
    except module.FamilyError as exc:
        raise ConfigError(str(exc)) from None


def launch(launcher: str | os.PathLike[str], args: Sequence[str], out: str | os.PathLike[str],
           profile: bool = False, nproc: int | None = None) -> None:
    """One run of ``launcher`` with ``args``: its timing record at ``out`` (the JSON list it appends
    to), or with ``profile`` the folder ``out`` of every rank's torch trace (or its skip note). The
    launcher runs in its checkout, so it is handed absolute paths; ``nproc``: its process count
    (default: the launcher's, one per visible GPU)."""
    env = dict(os.environ)
    if nproc:
        env["NPROC"] = str(nproc)
    out = Path(out)
    if profile:
        with atomic_folder(out) as part:
            _run([str(launcher), *args, "--profile", "torch", "--trace-dir", str(part.resolve())], env)
        return
    part = out.with_name(f"{out.name}.part")
    part.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        _run([str(launcher), *args, "--results-file", str(part.resolve())], env)
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
        Path(f"{part}.lock").unlink(missing_ok=True)  # the lock the benchmark's append takes


def _run(command: list[str], env: dict[str, str]) -> None:
    code = subprocess.run(command, env=env, check=False).returncode
    if code != 0:
        raise EmbprofError(f"{command[0]} exited with {code} (its output is above, in the job's log)")


@contextmanager
def atomic_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """An empty folder beside ``path`` (``<path>.part``) to fill; it replaces ``path`` whole when the
    block succeeds and is removed when it fails, leaving ``path`` as it was."""
    target = Path(path)
    part, previous = target.with_name(f"{target.name}.part"), target.with_name(f"{target.name}.previous")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    try:
        yield part
        shutil.rmtree(previous, ignore_errors=True)
        if target.exists():
            os.replace(target, previous)
        try:
            os.replace(part, target)
        except BaseException:
            if previous.exists():
                os.replace(previous, target)
            raise
        shutil.rmtree(previous, ignore_errors=True)
    finally:
        shutil.rmtree(part, ignore_errors=True)


def run_traces(traces: str | os.PathLike[str]) -> tuple[list[Path], list[Path]]:
    """A profiled run's folder: its ranks' traces and, where it has none, its skip notes."""
    folder = Path(traces)
    found = sorted(folder.glob(TRACES))
    notes = [] if found else sorted(folder.glob(SKIP_NOTES))
    if not found and not notes:
        raise ContractError(f"{folder}: no trace ({TRACES}) and no skip note ({SKIP_NOTES})")
    return found, notes
