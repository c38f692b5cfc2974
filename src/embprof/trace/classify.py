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

from embprof.arrow import first_bytes, has_prefix, index_in, matches, string_array, take
from embprof.labels import CONFIG_RANGE

from .range_layout import BACKENDS, PHASES

ITERATION_RANGE = r"^nsys_iter_[0-9]+$"
OTHER, CONFIG, ITERATION, BACKEND, PHASE, OP = range(6)
_FIXED = string_array([*BACKENDS, *PHASES])
# The first letters of every name that is not a stage.
_FIRST = np.frombuffer(b"Tnodtfb", np.uint8)
# The classes that add their name to the stage path of what lies inside them.
PATH_CLASSES = (OTHER, OP)


def classify(names: pa.Array, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row: its class (int8), and for backends and phases the value's index (else -1).

    Every name of a class starts with one of a few letters: the first byte of
    each name, read from the string array's buffers, sends each test to the few
    rows that could pass it; in most traces nearly every name starts otherwise
    (``aten::``, ``launch``, stage names), and most chunks hold no config range.
    """
    n = len(names)
    val = np.full(n, -1, dtype=np.int8)
    if layout != "default":
        return np.full(n, OP, dtype=np.int8), val
    cls = np.full(n, OTHER, dtype=np.int8)
    first = first_bytes(names)
    for kind, letters, prefix, pattern in _TESTS:
        rows = np.flatnonzero(letters[first])
        if len(rows) == 0:
            continue
        if kind == BACKEND:  # backends and phases: the names themselves
            which = index_in(take(names, rows), _FIXED)
            hit = which >= 0
            rows, which = rows[hit], which[hit]
            backend = which < len(BACKENDS)
            cls[rows] = np.where(backend, BACKEND, PHASE)
            val[rows] = np.where(backend, which, which - len(BACKENDS))
            continue
        hit = has_prefix(names, rows, prefix.encode())  # in the buffers: most rows fail it, none copied
        if pattern is not None and hit.any():
            hit[hit] = matches(take(names, rows[hit]), pattern)
        cls[rows[hit]] = kind
    return cls, val


def _letters(*names: str) -> np.ndarray:
    """By byte, whether a name that starts with it could be one of ``names`` (a table: one index
    per row, where np.isin costs a sort)."""
    table = np.zeros(256, bool)
    table[np.frombuffer("".join(n[0] for n in names).encode(), np.uint8)] = True
    return table


# (class, first letters of its names, prefix, pattern): the tests, each on the rows it could pass.
_TESTS = (
    (CONFIG, _letters("T"), "T", CONFIG_RANGE.pattern),
    (ITERATION, _letters("n"), "nsys_iter_", ITERATION_RANGE),
    (OP, _letters("o"), "op:", None),
    (BACKEND, _letters(*BACKENDS, *PHASES), None, None),
)
