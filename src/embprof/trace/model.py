"""The columnar rows every reader streams and the attribution consumes.

A trace is three streams of chunks: ranges (named CPU intervals on threads),
runtime calls (the CPU side of each launch: thread, time, correlation id) and
work items (GPU kernels, memcpys, memsets, or CPU leaf operators when no GPU
was traced, each with the correlation id of its launch). Every chunk is numpy
arrays (range names one Arrow string array), so the attribution never loops
over events in Python, and a reader can hand over a long trace a piece at a
time: nothing needs all of it in memory at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

KIND_KERNEL = 0
KIND_MEMCPY = 1
KIND_MEMSET = 2

TIME_GPU = "gpu-kernels"
TIME_CPU_LEAF = "cpu-leaf-ops"


@dataclass
class RangeRows:
    """Push/pop ranges of the default domain: thread key, the process key of that thread (as
    :class:`CallRows` keys it), [start, end) in ns (end -1: never closed), name."""

    thread: np.ndarray
    process: np.ndarray
    start: np.ndarray
    end: np.ndarray
    names: pa.Array  # one string per row

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class CallRows:
    """The calls that launched work: process key and correlation id (the join key), thread, CPU start."""

    process: np.ndarray
    corr: np.ndarray
    thread: np.ndarray
    start: np.ndarray

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class WorkRows:
    """GPU work (or CPU leaf ops): its launch's process key and correlation id, device interval in ns,
    kind, and a name id that the source turns into a name (:meth:`TraceSource.work_names`)."""

    process: np.ndarray
    corr: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray  # int8, KIND_*
    name: np.ndarray  # int64
    nbytes: np.ndarray  # int64: bytes a copy or memset moved (0 for kernels)
    mem: np.ndarray  # int64: memory kinds of a copy or memset (names.memory_kind_code; 0 for kernels)

    def __len__(self) -> int:
        return len(self.start)


class TraceSource(Protocol):
    """One trace file as streams of chunks, in the file's order.

    Each call of a stream method starts that stream again from the beginning
    (the attribution reads a stream twice when a trace is out of time order).
    """

    path: Path
    time_source: str

    def ranges(self) -> Iterator[RangeRows]: ...

    def calls(self) -> Iterator[CallRows]: ...

    def work(self) -> Sequence[Iterator[WorkRows]]:
        """One stream per table of work (kernels, copies, memsets), each in the order it was written."""
        ...

    def work_names(self, kind: int, ids: np.ndarray) -> list[str]:
        """The names of the given work name ids of one kind."""
        ...

    def close(self) -> None: ...
