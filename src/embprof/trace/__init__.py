"""Per-op GPU time from nsys and PyTorch profiler traces (the breakdown).

``breakdown(paths)`` -> ``{label: rows}`` with the DESIGN.md CSV columns;
``run_breakdown`` also gives each label's samples per iteration and its GPU-busy
time per iteration, which ``write_outputs`` stores next to the CSV as
``opcalls__<label>.samples.csv`` and ``opcalls__<label>.busy.json``.
Nothing here imports pandas but ``breakdown`` (whose rows are DataFrames) and
the PyTorch profiler reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from embprof.errors import TraceError

from .range_layout import LAYOUTS

if TYPE_CHECKING:
    import pandas as pd

    from .pipeline import LabelBreakdown


def __getattr__(name: str):
    """``run_breakdown`` and ``LabelBreakdown`` load the attribution (numpy, Arrow) when first used."""
    if name in ("run_breakdown", "LabelBreakdown"):
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def breakdown(
    paths: list[Path], layout: str = "default", categories: Path | None = None, merge: bool = False
) -> dict[str, pd.DataFrame]:
    """Label -> per-op rows (DESIGN.md CSV columns); ``merge``: traces of one label add up."""
    from .pipeline import run_breakdown

    return {label: lb.rows for label, lb in run_breakdown(paths, layout, categories, merge=merge).items()}


def check_output_names(results: dict[str, LabelBreakdown], out_dir: Path) -> None:
    """Every label gets file names of its own that this file system takes; else :class:`TraceError`
    naming a trace of the label, before anything is written."""
    from embprof.atomic import name_max
    from embprof.results.paths import busy_name, opcalls_name, samples_name

    limit = name_max(out_dir)
    owner: dict[str, str] = {}
    for label, lb in results.items():
        trace = lb.traces[0] if lb.traces else "-"
        name = opcalls_name(label)
        if name in owner:
            raise TraceError(trace, f"labels {owner[name]!r} and {label!r} both become the file name {name}")
        owner[name] = label
        longest = max(len(n.encode()) for n in (name, busy_name(label), samples_name(label)))
        if longest > limit:
            raise TraceError(trace, f"config label {label[:48]!r}... is too long for a file name "
                                    f"({longest} bytes; this file system takes {limit})")


def write_outputs(results: dict[str, LabelBreakdown], out_dir: Path) -> list[Path]:
    """Write ``opcalls__<label>.csv``, its ``.samples.csv`` and its ``.busy.json`` per label into
    ``out_dir``, all or none: every file goes to a temporary first, they are renamed into place
    only once all are written, and a rename that fails puts back the files renamed before it (a
    CSV, its samples and its sidecar always agree). Returns the CSV paths (the folder is a results
    folder's ``opcalls/``, or any other)."""
    from embprof.atomic import atomic_paths
    from embprof.results.busy import write_busy
    from embprof.results.opcalls import write_opcalls
    from embprof.results.paths import busy_name, opcalls_name, samples_name
    from embprof.results.samples import write_samples

    check_output_names(results, Path(out_dir))
    csvs = [Path(out_dir) / opcalls_name(label) for label in results]
    samples = [Path(out_dir) / samples_name(label) for label in results]
    sidecars = [Path(out_dir) / busy_name(label) for label in results]
    n = len(csvs)
    with atomic_paths([*csvs, *samples, *sidecars]) as temps:
        for i, lb in enumerate(results.values()):
            write_opcalls(lb.columns, temps[i])
            write_samples(lb.columns, lb.samples_ns, temps[n + i])
            write_busy(lb.busy, temps[2 * n + i])
    return csvs


__all__ = ["LAYOUTS", "LabelBreakdown", "TraceError", "breakdown", "check_output_names", "run_breakdown",
           "write_outputs"]
