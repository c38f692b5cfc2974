"""dynemb's failures, one type per kind (docs/DESIGN.md, "Names"): the library's errors live here,
apart from embprof's, since dynemb is the code embprof measures and depends on no embprof."""

from __future__ import annotations


class PartialUpdateError(RuntimeError):
    """A step failed after it wrote to the rows: rerunning it another way would apply it twice
    (the kernels' dispatch raises it, :mod:`dynemb.kernels`)."""
