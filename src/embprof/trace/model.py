"""The columnar form every reader produces and the attribution consumes.

One trace = ranges (named CPU intervals on threads) + work items (GPU
kernels, memcpys, memsets, or CPU leaf operators when no GPU was traced),
each work item carrying the thread and CPU time of its launch. Everything is
numpy arrays, names are integer codes into small string tables, so the
attribution never loops over events in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

KIND_KERNEL = 0
KIND_MEMCPY = 1
KIND_MEMSET = 2

TIME_GPU = "gpu-kernels"
TIME_CPU_LEAF = "cpu-leaf-ops"


@dataclass
class Ranges:
    """Closed ranges of the default domain: thread key, [start, end) in ns, name code."""

    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    name: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class Work:
    """GPU work (or CPU leaf ops) with the launch's thread and CPU time, device interval in ns."""

    thread: np.ndarray
    launch: np.ndarray
    start: np.ndarray
    end: np.ndarray
    name: np.ndarray
    kind: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class Trace:
    """One trace file's work, and its ranges or (when read for one layout) their attribution context."""

    path: Path
    ranges: Ranges | None
    work: Work
    time_source: str = TIME_GPU
    dropped_unlaunched: int = 0
    context: Any = None  # attribute.RangeContext, built by a reader that overlaps it with its I/O
