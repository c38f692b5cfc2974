"""Pick the reader by content, not by name (a renamed export still reads)."""

from __future__ import annotations

from pathlib import Path

from .errors import TraceError
from .kineto import read_kineto
from .model import Trace
from .nsys import read_nsys_rep, read_sqlite

SQLITE_MAGIC = b"SQLite format 3\x00"


def read_trace(path: Path, nsys: str | None = None, layout: str | None = None) -> Trace:
    """One trace file; with ``layout`` an nsys export also brings its range context (read in parallel)."""
    if not path.exists():
        raise TraceError(path, "no such file")
    if not path.is_file():
        raise TraceError(path, "not a file")
    try:
        with path.open("rb") as fh:
            head = fh.read(64)
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror}") from None
    if head.startswith(SQLITE_MAGIC):
        return read_sqlite(path, layout=layout)
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        return read_kineto(path)
    if path.suffix == ".nsys-rep":
        return read_nsys_rep(path, nsys, layout)
    if not head:
        raise TraceError(path, "empty file")
    raise TraceError(path, "not an Nsight Systems SQLite export, .nsys-rep or PyTorch profiler JSON trace")
