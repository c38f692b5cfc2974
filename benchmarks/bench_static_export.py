"""Static PNG export: one kaleido browser session for a batch of figures vs one per figure.

    python benchmarks/bench_static_export.py [--figures 6]

Prints wall seconds of both ways and their ratio. The figures are the report's
own sunbursts (per-op rows shaped like a smoke run's), at their layout size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# The tests' generator of per-op rows: a helper module of tests/, not a package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from report_inputs import opcalls_frame  # noqa: E402

from embprof.plots.export import PngJob, export_pngs  # noqa: E402
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=int, default=6)
    args = parser.parse_args()
    frames = [opcalls_frame(scale=1 + i / 10) for i in range(args.figures)]
    figs = [sunburst_figure(f, assign_letter_codes(f), f"config {i}") for i, f in enumerate(frames)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        start = time.perf_counter()
        for i, fig in enumerate(figs):
            export_pngs([PngJob(fig, out / f"single_{i}.png")])
        each = time.perf_counter() - start
        start = time.perf_counter()
        export_pngs([PngJob(fig, out / f"batch_{i}.png") for i, fig in enumerate(figs)])
        batch = time.perf_counter() - start
    print(f"{'figures':>8} {'one session each (s)':>21} {'one session (s)':>16} {'ratio':>6}")
    print(f"{args.figures:>8} {each:>21.2f} {batch:>16.2f} {each / batch:>5.1f}x")


if __name__ == "__main__":
    main()
