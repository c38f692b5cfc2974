"""Pick the reader by content, not by name (a renamed export still reads)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from embprof.errors import TraceError

from .model import TraceSource

SQLITE_MAGIC = b"SQLite format 3\x00"


@contextmanager
def open_trace(path: Path, nsys: str | None = None) -> Iterator[TraceSource]:
    """One trace file as a :class:`~embprof.trace.model.TraceSource`, closed (and any export of a
    ``.nsys-rep`` removed) when the block ends."""
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
        with _nsys(path, path) as source:
            yield source
    elif head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        from .kineto import KinetoSource  # JSON traces only: it needs pandas

        yield KinetoSource(path)
    elif path.suffix == ".nsys-rep":
        from .nsys import export_rep

        with tempfile.TemporaryDirectory(prefix="embprof-export-") as tmp, _nsys(export_rep(path, nsys, tmp), path) as source:
            yield source
    elif not head:
        raise TraceError(path, "empty file")
    else:
        raise TraceError(path, "not an Nsight Systems SQLite export, .nsys-rep or PyTorch profiler JSON trace")


@contextmanager
def _nsys(export: Path, shown_as: Path) -> Iterator[TraceSource]:
    from .nsys import NsysSource

    source = NsysSource(export, shown_as=shown_as)
    try:
        yield source
    finally:
        source.close()
