"""Outputs appear whole or not at all: every file the project writes goes through here.

A reader (a Snakemake job, a browser, a second benchmark process) never sees a
half-written file: the data goes to a temporary file in the target's folder,
which is renamed over the target only once it is complete.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any, indent: int = 2) -> Path:
    return write_text(path, json.dumps(obj, indent=indent) + "\n")


def write_csv(frame: pd.DataFrame, path: str | os.PathLike[str], **to_csv: Any) -> Path:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, **to_csv)
    return Path(path)
