"""What each range is in our layout (DESIGN.md, "Attribution rule"), decided per row in Arrow.

Layout ``default``: config (``^T<digits>_totalB``), iteration
(``nsys_iter_<digits>``), backend (``dyn``/``trc``), phase (``forward``/
``backward``), op (``op:*``); anything else is a stage (``OTHER``). Layout
``any``: every range is an op. The string tests run in Arrow's kernels over
the whole column, so a trace whose per-launch ranges all have distinct names
(PyTorch's ``..., seq = N``) costs no more than one with a handful.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from embprof.labels import CONFIG_RANGE

from .arrow import first_bytes, index_in, matches, starts_with, string_array, take
from .layouts import BACKENDS, PHASES

ITERATION_RANGE = r"^nsys_iter_[0-9]+$"
OTHER, CONFIG, ITERATION, BACKEND, PHASE, OP = range(6)
_FIXED = string_array([*BACKENDS, *PHASES])
# The first letters of every name that is not a stage.
_FIRST = np.frombuffer(b"Tnodtfb", np.uint8)
# The classes that add their name to the stage path of what lies inside them.
PATH_CLASSES = (OTHER, OP)


def classify(names: pa.Array, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row: its class (int8), and for backends and phases the value's index (else -1).

    Every name of a class starts with one of a few letters (``T``, ``n``, ``o``,
    ``d``/``t``, ``f``/``b``): the first byte of each name, read from the string
    array's buffers, picks the few rows that need a string test; in most traces
    nearly every name starts otherwise (``aten::``, ``launch``, stage names).
    """
    n = len(names)
    val = np.full(n, -1, dtype=np.int8)
    if layout != "default":
        return np.full(n, OP, dtype=np.int8), val
    cls = np.full(n, OTHER, dtype=np.int8)
    first = first_bytes(names)
    maybe = np.flatnonzero(np.isin(first, _FIRST))
    if len(maybe) == 0:
        return cls, val
    sub = take(names, maybe) if len(maybe) < n else names
    sub_cls, sub_val = cls[maybe], val[maybe]
    _mark(sub_cls, CONFIG, sub, "T", CONFIG_RANGE.pattern)
    _mark(sub_cls, ITERATION, sub, "nsys_iter_", ITERATION_RANGE)
    _mark(sub_cls, OP, sub, "op:", None)
    index = index_in(sub, _FIXED)
    hit = np.flatnonzero(index >= 0)
    if len(hit):
        which = index[hit]
        backend = which < len(BACKENDS)
        sub_cls[hit] = np.where(backend, BACKEND, PHASE)
        sub_val[hit] = np.where(backend, which, which - len(BACKENDS))
    cls[maybe], val[maybe] = sub_cls, sub_val
    return cls, val


def _mark(cls: np.ndarray, kind: int, names: pa.Array, prefix: str, pattern: str | None) -> None:
    """Rows that start with ``prefix`` (and match ``pattern``, tested on those rows only) get ``kind``."""
    rows = np.flatnonzero(starts_with(names, prefix))
    if pattern is not None and len(rows):
        rows = rows[matches(take(names, rows), pattern)]
    cls[rows] = kind
