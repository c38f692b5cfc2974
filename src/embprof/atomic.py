"""Outputs appear whole or not at all: every file the project writes goes through here.

A reader (a Snakemake job, a browser, a second benchmark process) never sees a
half-written file: the data goes to a temporary file in the target's folder,
which is renamed over the target only once it is complete.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the benchmark writes through here, where pandas need not be installed
    import pandas as pd


_TEMP_STEM = 64


def name_max(folder: str | os.PathLike[str]) -> int:
    """The longest file name (bytes) the file system of ``folder`` (or its nearest existing parent) takes."""
    here = Path(folder).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        return os.pathconf(here, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed over ``path`` when the block succeeds.

    ``suffix`` is for writers that choose a format by file name (``.json.gz``).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # The temporary's name is bounded, so any name the file system takes can be written.
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:_TEMP_STEM]}.", suffix=suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        # mkstemp makes 0600 files; give the result the mode a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_paths(paths: Sequence[str | os.PathLike[str]]) -> Iterator[list[Path]]:
    """Temporary paths beside ``paths``; when the block succeeds they replace them all, or none.

    For outputs that must agree with each other (a per-op CSV and its busy sidecar): each
    target that exists is kept under a link until every rename is done, and a rename that
    fails puts back those done before it, so a failure leaves every target as it was.
    """
    targets = [Path(p) for p in paths]
    with ExitStack() as stack:
        temps = [stack.enter_context(_temporary(target)) for target in targets]
        yield temps
        _replace_all(temps, targets)


@contextmanager
def _temporary(target: Path) -> Iterator[Path]:
    """A temporary beside ``target``, removed when the block ends unless it was renamed away."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:_TEMP_STEM]}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def _replace_all(temps: Sequence[Path], targets: Sequence[Path]) -> None:
    for target in targets:
        if target.is_dir():
            raise IsADirectoryError(f"{target}: is a folder, not a file to replace")
    mode = 0o666 & ~_umask()
    kept: list[tuple[Path, Path | None]] = []  # (target, its previous version's link or None)
    try:
        for tmp, target in zip(temps, targets, strict=True):
            os.chmod(tmp, mode)
            previous = None
            if target.exists():
                previous = target.with_name(f".{target.name[:_TEMP_STEM]}.{os.getpid()}.previous")
                previous.unlink(missing_ok=True)
                try:
                    os.link(target, previous)
                except OSError:  # a file system without hard links
                    shutil.copy2(target, previous)
            kept.append((target, previous))
            os.replace(tmp, target)
    except BaseException:
        for target, previous in reversed(kept):
            if previous is not None:
                os.replace(previous, target)
            else:
                target.unlink(missing_ok=True)
        raise
    for _, previous in kept:
        if previous is not None:
            previous.unlink(missing_ok=True)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any, indent: int = 2) -> Path:
    return write_text(path, json.dumps(obj, indent=indent) + "\n")


def write_csv(
    table: Mapping[str, Any] | pd.DataFrame, path: str | os.PathLike[str], columns: Sequence[str],
    float_format: str | None = None,
) -> Path:
    """``columns`` of ``table`` (a DataFrame, or a mapping of column name to values) as CSV.

    The bytes pandas' ``to_csv(index=False)`` writes (minimal quoting, ``\\n``, floats by
    ``float_format`` or ``repr``, NaN and None empty), without pandas: the breakdown
    writes its table without importing it.
    """
    import numpy as np

    cells = []
    for name in columns:
        values = np.asarray(table[name])
        if values.dtype.kind == "f":
            fmt = (lambda v: float_format % v) if float_format else repr
            cells.append(["" if v != v else fmt(v) for v in values.tolist()])
        elif values.dtype.kind in "iub":
            cells.append([str(v) for v in values.tolist()])
        else:
            cells.append(["" if _missing(v) else str(v) for v in values.tolist()])
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(zip(*cells, strict=True))
    return Path(path)


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA: written as an empty field, as pandas writes them."""
    try:
        return value is None or bool(value != value)
    except TypeError:  # pandas.NA compares to NA, which has no truth value
        return True
