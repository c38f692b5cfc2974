"""Comparing two runs (docs/COMPARE.md): per-config and per-op deltas, each marked a change or
within noise by a stated test on the repeats, warnings where the environments differ, and a
regression gate.

``compare_runs(old, new)`` is the one entry point; it takes two
:class:`~embprof.results.run.Run` objects, whatever they were read from
(``Run.from_folder`` a results folder, ``embprof.results.database.read_run`` a run of
a results database). ``embprof diff`` and the report's ``compare_to`` both go through it.
"""

from __future__ import annotations

from embprof.compare.baseline import baseline_warnings
from embprof.compare.deltas import (
    CHANGE,
    METRICS,
    NEW,
    NOISE,
    OP_KEYS,
    REMOVED,
    UNTESTED,
    Comparison,
    config_deltas,
    op_deltas,
)
from embprof.compare.environment import environment_warnings
from embprof.compare.gate import gate_failures, gate_lost, gate_untested, nothing_timed
from embprof.results.run import Run
from embprof.stats import ALPHA


def compare_runs(old: Run, new: Run, alpha: float = ALPHA) -> Comparison:
    """Every per-config and per-op delta of ``new`` against ``old``, the environment warnings, and
    whether TBE (the same code in both runs) moved."""
    configs = config_deltas(old.records, new.records, alpha)
    return Comparison(
        old=old.name,
        new=new.name,
        configs=configs,
        ops=op_deltas(old, new, alpha),
        warnings=environment_warnings(old, new) + baseline_warnings(configs, old, new),
        alpha=alpha,
    )


__all__ = [
    "ALPHA", "CHANGE", "METRICS", "NEW", "NOISE", "OP_KEYS", "REMOVED", "UNTESTED", "Comparison",
    "Run", "compare_runs", "gate_failures", "gate_lost", "gate_untested", "nothing_timed",
]
