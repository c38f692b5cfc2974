"""One writer at a time for a file that several processes update in place.

A results database, or the benchmark's list of records, is read, changed and written
back; two processes doing that at once lose one's update (or one dies on SQLite's
own lock). Every such writer holds an exclusive lock on ``<file>.lock`` (an advisory
lock, released by the system when its holder dies) for the whole read-change-write.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from embprof.errors import BusyError

# How long a writer waits for another one to finish before it gives up (seconds).
WAIT_S = 600.0


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file of ``path``: beside it, ``<name>.lock``."""
    target = Path(path)
    return target.with_name(f"{target.name}.lock")


@contextmanager
def exclusive(path: str | os.PathLike[str], timeout: float = WAIT_S) -> Iterator[None]:
    """Hold ``path``'s lock for the block; :class:`BusyError` (one line) after ``timeout`` seconds."""
    from filelock import FileLock, Timeout

    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    held = FileLock(lock)
    try:
        held.acquire(timeout=timeout)
    except Timeout:
        raise BusyError(
            f"{path}: another process has been writing it for over {timeout:.0f} s (its lock: {lock}); "
            "try again when it is done"
        ) from None
    try:
        yield
    finally:
        held.release()
