"""The breakdown's input invariants on streams of any chunking and order (issue 34, case 4): a work
record that repeats another exactly is refused wherever it lies, records that only share a start
or a correlation id (a graph's kernels) are not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embprof.errors import TraceError
from embprof.trace.invariants import checked
from embprof.trace.model import WorkRows


class _Source:
    """Work records as a trace source's one work stream, in chunks of ``chunk`` rows."""

    path = "t.sqlite"
    time_source = "gpu-kernels"

    def __init__(self, records: np.ndarray, chunk: int) -> None:
        self.records, self.chunk = records, chunk

    def work(self):
        def stream():
            for lo in range(0, len(self.records), self.chunk):
                r = self.records[lo : lo + self.chunk]
                yield WorkRows(process=np.zeros(len(r), np.int64), corr=r[:, 0], start=r[:, 1], end=r[:, 2],
                               kind=np.zeros(len(r), np.int8), name=r[:, 3], nbytes=np.zeros(len(r), np.int64),
                               mem=np.zeros(len(r), np.int64))
        return [stream()]


def _drain(records: np.ndarray, chunk: int) -> None:
    for stream in checked(_Source(records, chunk), "default").work():
        for _ in stream:
            pass


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 8), st.integers(0, 3), st.integers(0, 2)),
                  min_size=1, max_size=40),
    chunk=st.integers(1, 7),
    in_order=st.booleans(),
)
def test_a_repeated_record_is_refused_and_nothing_else(rows, chunk, in_order):
    records = np.array([(c, s, s + d, n) for c, s, d, n in rows], np.int64)
    if in_order:
        records = records[np.argsort(records[:, 1], kind="stable")]
    repeats = len(records) - len(np.unique(records, axis=0))
    if repeats:
        with pytest.raises(TraceError, match=f"{repeats} kernel/copy record\\(s\\) repeat another exactly"):
            _drain(records, chunk)
    else:
        _drain(records, chunk)
