"""Assemble the shareable report: results/report/index.html, summary.md and figures/*.png.

    python workflow/scripts/report.py --results results/benchmark_results.json \
        --configs results/configs.tsv --opcalls-dir results/opcalls \
        --sunburst-dir results/sunburst --latency-html results/plots/latency.html \
        --status-dir results/status --environment results/environment.json \
        [--bandwidth-dir results/bandwidth --peak results/peak_bandwidth.json] \
        [--compare-to PREVIOUS_RESULTS_DIR] --out-dir results/report
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embprof.report.build import ReportInputs, build_report
from embprof.report.cli import run_guarded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True, help="benchmark_results.json")
    parser.add_argument("--configs", type=Path, required=True, help="configs.tsv")
    parser.add_argument("--opcalls-dir", type=Path, required=True)
    parser.add_argument("--sunburst-dir", type=Path, required=True)
    parser.add_argument("--latency-html", type=Path, required=True)
    parser.add_argument("--status-dir", type=Path, required=True)
    parser.add_argument("--environment", type=Path, required=True, help="environment.json")
    parser.add_argument("--compare-to", type=Path, help="a previous results/ folder")
    parser.add_argument(
        "--bandwidth-dir", type=Path, help="bandwidth__<label>.csv files: GB/s columns and chart"
    )
    parser.add_argument("--peak", type=Path, help="peak_bandwidth.json: the %% of peak reference")
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    inputs = ReportInputs(
        results=args.results,
        configs=args.configs,
        opcalls_dir=args.opcalls_dir,
        sunburst_dir=args.sunburst_dir,
        latency_html=args.latency_html,
        status_dir=args.status_dir,
        environment=args.environment,
        out_dir=args.out_dir,
        compare_to=args.compare_to,
        bandwidth_dir=args.bandwidth_dir,
        peak=args.peak,
    )
    return run_guarded("report.py", lambda: print(f"{build_report(inputs)}: written"))


if __name__ == "__main__":
    sys.exit(main())
