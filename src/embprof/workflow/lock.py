"""Snakemake's lock on a working directory, left behind when a run is killed hard.

Snakemake locks the directory while it runs (``.snakemake/locks/``) and removes
the lock when it ends; a SIGKILL, an OOM kill or a power loss leaves it, and the
next run stops with a LockException. The lock is stale when no snakemake process
runs in that directory: then removing it is what ``snakemake --unlock`` does.
Processes are found through ``/proc`` (Linux); one whose working directory this
user cannot read counts as running here, so a lock is never taken from a live run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from embprof.errors import LockHeldError

LOCKS = Path(".snakemake", "locks")
_PROC = Path("/proc")


def _is_snakemake(argv: list[str]) -> bool:
    """``snakemake ...`` (the console script, run as itself or by its interpreter),
    ``python -m snakemake ...`` or ``python .../snakemake/__main__.py ...``."""
    program = [arg for arg in argv[:2] if arg and not arg.startswith("-")]
    for arg in program:
        if os.path.basename(arg) == "snakemake":
            return True
        if os.path.basename(arg) == "__main__.py" and os.path.basename(os.path.dirname(arg)) == "snakemake":
            return True
    return argv[1:3] == ["-m", "snakemake"]


def _directory(argv: list[str], cwd: Path) -> Path:
    """The working directory a snakemake command line runs in (``--directory``/``-d``, else ``cwd``)."""
    for i, arg in enumerate(argv):
        if arg in ("--directory", "-d") and i + 1 < len(argv):
            return (cwd / argv[i + 1]).resolve()
        if arg.startswith("--directory="):
            return (cwd / arg.split("=", 1)[1]).resolve()
    return cwd


def snakemake_pids(workdir: str | os.PathLike[str], proc: Path = _PROC) -> list[int]:
    """The snakemake processes that run in ``workdir`` (or may: their directory is unreadable)."""
    target = Path(workdir).resolve()
    found = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # gone, or not ours to read
        if not _is_snakemake(argv):
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except FileNotFoundError:
            continue  # ended meanwhile
        except OSError:
            found.append(int(entry.name))  # another user's: it may run here
            continue
        if _directory(argv, cwd) == target:
            found.append(int(entry.name))
    return sorted(found)


@dataclass(frozen=True)
class Unlocked:
    """What :func:`release_stale_lock` did: the lock files it removed (none: there was no lock)."""

    removed: tuple[Path, ...]


def release_stale_lock(workdir: str | os.PathLike[str] = ".", proc: Path = _PROC) -> Unlocked:
    """Remove ``workdir``'s Snakemake lock when no snakemake process runs there.

    :class:`LockHeldError` when one does (the lock is its own).
    """
    locks = Path(workdir) / LOCKS
    files = tuple(sorted(locks.glob("*.lock"))) if locks.is_dir() else ()
    if not files:
        return Unlocked(())
    running = snakemake_pids(workdir, proc)
    if running:
        raise LockHeldError(
            f"{Path(workdir).resolve()}: snakemake (pid {', '.join(map(str, running))}) runs here and "
            "holds the lock; wait for it to end, or stop it first"
        )
    for path in files:
        path.unlink(missing_ok=True)
    return Unlocked(files)
