"""Compare two runs: per-config and per-op deltas, each a change or within noise.

    embprof diff OLD_RESULTS NEW_RESULTS [--gate PCT] [--format text|markdown] [--ops N]
    embprof diff --db DB OLD_RUN NEW_RUN [...]      two runs of one results database


A delta is a change when the Mann-Whitney U test on the two runs' samples (a
config's repeats, an op's profiled iterations) gives p < 0.05 and the delta
exceeds the larger of the two spreads (docs/COMPARE.md). Warnings come first
where the environments differ (GPU, commit, versions, kernel path). With
--gate PCT the command exits 1 when any config's median train or eval time got
slower by more than PCT percent and more than its noise, when a config metric
timed in OLD has no time in NEW (missing, failed, or null), or when NEW timed
nothing; it prints those rows, naming the configs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "compare two results folders (or two runs of a database); --gate PCT fails on a slowdown beyond PCT and the noise"
FORMATS = ("text", "markdown")
DEFAULT_OPS = 25


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", help="the results folder (with --db: the run id) to compare against")
    parser.add_argument("new", help="the results folder (with --db: the run id) being judged")
    parser.add_argument("--db", type=Path, help="a results database: OLD and NEW are run ids in it (embprof db runs)")
    parser.add_argument(
        "--gate", type=float, metavar="PCT",
        help="exit 1 when a config's median train or eval time got slower by more than PCT %% and its noise",
    )
    parser.add_argument("--format", choices=FORMATS, default="text", help="text, or a Markdown table for a pull request")
    parser.add_argument("--ops", type=int, default=DEFAULT_OPS, metavar="N", help=f"per-op rows to show (default {DEFAULT_OPS})")


def run(args: argparse.Namespace) -> int:
    from embprof.compare import compare_runs
    from embprof.compare.render import render
    from embprof.errors import ConfigError
    from embprof.results.run import Run

    if args.gate is not None and not args.gate >= 0:
        raise ConfigError(f"--gate must be a percentage >= 0, got {args.gate:g}")
    if args.ops < 0:
        raise ConfigError(f"--ops must be >= 0, got {args.ops}")
    if args.db is not None:
        from embprof.results.database import read_run

        old, new = (read_run(args.db, run_id) for run_id in (args.old, args.new))
    else:
        old, new = Run.from_folder(args.old), Run.from_folder(args.new)
    comparison = compare_runs(old, new)
    verdict, failed = ("", False) if args.gate is None else _gate(comparison, new.records, args.gate, args.format)
    print(render(comparison, args.format, args.ops, verdict), end="")
    return 1 if failed else 0


def _gate(comparison, new_records, pct: float, fmt: str) -> tuple[str, bool]:
    from embprof.compare import gate_failures, gate_lost, gate_untested, nothing_timed
    from embprof.compare.render import config_cells, lost_cells, text_table
    from embprof.report.markdown import md_table, md_text

    say = md_text if fmt == "markdown" else str  # names from the runs, escaped in Markdown
    failures, untested = gate_failures(comparison, pct), gate_untested(comparison, pct)
    lost, empty = gate_lost(comparison, new_records), nothing_timed(comparison)
    table = md_table if fmt == "markdown" else text_table
    lines = []
    if len(failures):
        names = say(", ".join(sorted(set(failures["label"]))))
        lines += [
            f"gate {pct:g}%: FAILED: {len(failures)} config metric(s) slower by more than {pct:g}% "
            f"and more than their noise: {names}",
            "",
            table(config_cells(failures)),
        ]
    if len(lost):
        names = say(", ".join(sorted(set(lost["label"]))))
        lines += [*([""] if lines else []),
                  f"gate {pct:g}%: FAILED: {len(lost)} config metric(s) timed before have no time now: {names}",
                  "", table(lost_cells(lost))]
    if empty:
        lines += [*([""] if lines else []), f"gate {pct:g}%: FAILED: {say(comparison.new)} timed no config: nothing to pass"]
    if not lines:
        lines.append(
            f"gate {pct:g}%: passed: no config's median train or eval time got slower by more "
            f"than {pct:g}% and more than its noise, and every config metric timed before is timed now"
        )
    if len(untested):
        lines += ["", f"gate {pct:g}%: {len(untested)} metric(s) slower by more than {pct:g}% could "
                  f"not be tested (fewer than two repeats): {say(', '.join(sorted(set(untested['label']))))}"]
    return "\n".join(lines), bool(len(failures) or len(lost) or empty)
