"""The run's results as one SQLite database, and several runs in one (docs/database.md).

    embprof db write [--results-dir results] [--run-id ID]    the folder's run -> RESULTS/embprof.sqlite
    embprof db merge SOURCE [--into DB] [--run-id ID]         another folder's run (or a database's runs) added
    embprof db runs [DB]                                      the runs a database holds
    embprof db schema [DB]                                    its tables, views and columns, as Markdown

`write` replaces the rows of the configs whose files changed and leaves the others
alone. Query the file with `sqlite-utils query`, `sqlite3` or `embprof diff --db DB
RUN RUN`. A database of a newer schema version is refused, naming both versions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "the results as one SQLite database: write, merge another run, list runs, print the schema"
DEFAULT_RESULTS = Path("results")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    write = actions.add_parser("write", help="write (update) the results folder's own database")
    write.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS, help="the results folder (default: results)")
    write.add_argument("--run-id", help="the run's name when the file is made (default: <first start>-<commit>)")
    write.set_defaults(act=_write)
    merge = actions.add_parser("merge", help="add another results folder's run, or every run of a database")
    merge.add_argument("source", type=Path, help="a results folder, or a results database")
    merge.add_argument("--into", type=Path, help="the database to add to (default: results/embprof.sqlite)")
    merge.add_argument("--run-id", help="the name to add the run under (default: its own)")
    merge.set_defaults(act=_merge)
    runs = actions.add_parser("runs", help="the runs a database holds")
    runs.add_argument("db", type=Path, nargs="?", help="the database (default: results/embprof.sqlite)")
    runs.set_defaults(act=_runs)
    schema = actions.add_parser("schema", help="the tables, views and columns of a database, as Markdown")
    schema.add_argument("db", type=Path, nargs="?", help="a database (default: a new one of this embprof's schema)")
    schema.set_defaults(act=_schema)


def run(args: argparse.Namespace) -> None:
    args.act(args)


def _default_db() -> Path:
    from embprof.results.paths import ResultsPaths

    return ResultsPaths(DEFAULT_RESULTS).database


def _write(args: argparse.Namespace) -> None:
    from embprof.results.database import write_folder
    from embprof.results.paths import ResultsPaths

    paths = ResultsPaths(args.results_dir)
    print(write_folder(paths, args.run_id).line(paths.database))


def _merge(args: argparse.Namespace) -> None:
    from embprof.results.database import merge_into

    target = args.into or _default_db()
    for written in merge_into(target, args.source, args.run_id):
        print(written.line(target))


def _runs(args: argparse.Namespace) -> None:
    from embprof.compare.render import text_table
    from embprof.pages.cells import Column, fmt_count, to_cells
    from embprof.results.database import reading
    from embprof.results.database.read import run_list

    with reading(args.db or _default_db()) as db:
        runs = run_list(db)
    columns = (
        Column("run_id", "run"), Column("own", "own"), Column("configs", "configs", fmt_count, True),
        Column("failed", "failed", fmt_count, True), Column("started_at", "started"),
        Column("git_commit", "commit"), Column("device", "device"), Column("results_dir", "results folder"),
    )
    print(text_table(to_cells(runs, columns)))


def _schema(args: argparse.Namespace) -> None:
    from embprof.results.database import reading
    from embprof.results.database.describe import empty_schema_markdown, schema_markdown

    if args.db is None:
        print(empty_schema_markdown(), end="")
        return
    with reading(args.db) as db:
        print(schema_markdown(db), end="")
