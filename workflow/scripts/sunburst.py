"""One config's sunburst (a ring per phase, stage and op, per backend): a PNG and an HTML page.

    python workflow/scripts/sunburst.py --opcalls results/opcalls/opcalls__<label>.csv \
        --png results/sunburst/<label>.png --html results/sunburst/<label>.html
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embprof.atomic import write_text
from embprof.plots.export import PngJob, export_pngs
from embprof.plots.figures import BACKEND_NAMES, dom_id, figure_div
from embprof.plots.sunburst import assign_letter_codes, sunburst_figure, sunburst_title
from embprof.report.cli import run_guarded
from embprof.report.environment import CPU_STAND_IN_NOTE
from embprof.report.html import figure_page, legend_items
from embprof.report.load import read_busy, read_opcalls
from embprof.report.tables import busy_note, config_legends

PREFIX = "opcalls__"


def label_of(opcalls: Path) -> str:
    """``opcalls__<label>.csv`` -> ``<label>``."""
    stem = opcalls.name.removesuffix(".csv")
    return stem.removeprefix(PREFIX)


def write_sunburst(opcalls: Path, png: Path, html: Path) -> None:
    frame = read_opcalls(opcalls)
    busy = read_busy(opcalls.with_name(opcalls.name.removesuffix(".csv") + ".busy.json"))
    label = label_of(opcalls)
    fig = sunburst_figure(frame, assign_letter_codes(frame), sunburst_title(label))
    legends = config_legends(frame)
    items = legend_items(
        legends,
        {b: busy_note(busy, b) for b in legends},
        {b: f"{BACKEND_NAMES.get(b, b)} ({b})" for b in legends},
    )
    figure_id = dom_id("sunburst", label)
    note = CPU_STAND_IN_NOTE if busy is not None and busy.cpu_leaf_ops else ""
    page = figure_page(sunburst_title(label), figure_id, figure_div(fig, figure_id), items, note)
    export_pngs([PngJob(fig, png)])
    write_text(html, page)
    print(f"{png}, {html}: {len(frame)} op rows, backends {', '.join(legends) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opcalls", type=Path, required=True, help="opcalls__<label>.csv")
    parser.add_argument("--png", type=Path, required=True, help="static image to write")
    parser.add_argument("--html", type=Path, required=True, help="interactive page to write")
    args = parser.parse_args(argv)
    return run_guarded("sunburst.py", lambda: write_sunburst(args.opcalls, args.png, args.html))


if __name__ == "__main__":
    sys.exit(main())
