"""Relative links from the report to a config's own files in the results folder, where present.

Links are relative to the report's folder, so they keep working when the whole results
folder is copied elsewhere; a file the folder does not hold (a trace left on the GPU host, a
config that failed before its breakdown) gets no link rather than a dead one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from embprof.results.paths import TRACE_SUFFIX, ResultsPaths

# (link text, where the results folder keeps it), in the order a reader follows a config's steps.
_FILES: tuple[tuple[str, Callable[[ResultsPaths, str], Path]], ...] = (
    *((f"trace ({p})", lambda paths, label, p=p: paths.trace(label, p)) for p in TRACE_SUFFIX),
    ("SQLite export", ResultsPaths.sqlite),
    ("per-op CSV", ResultsPaths.opcalls),
    ("busy sidecar", ResultsPaths.busy),
    ("bandwidth CSV", ResultsPaths.bandwidth),
    ("timing record", ResultsPaths.timing),
    ("status", ResultsPaths.status),
    ("sunburst page", ResultsPaths.sunburst_html),
)
LOGGED_STEPS = ("profile", "export", "breakdown", "timing", "bandwidth", "sunburst")


@dataclass(frozen=True)
class Link:
    text: str
    href: str


def config_links(paths: ResultsPaths, label: str, report_dir: Path, with_per_op: bool = True) -> list[Link]:
    """The config's files and step logs that exist, each as a link relative to ``report_dir``.

    ``with_per_op`` False (a config whose status is not ok): per-op files an earlier run left
    are not this run's, so they get no link."""
    per_op = {"per-op CSV", "busy sidecar", "bandwidth CSV", "sunburst page"}
    files = [(text, where(paths, label)) for text, where in _FILES if with_per_op or text not in per_op]
    files += [(f"{step} log", paths.log(step, label)) for step in LOGGED_STEPS]
    return [Link(text, _relative(path, report_dir)) for text, path in files if path.is_file()]


def _relative(path: Path, start: Path) -> str:
    return quote(Path(os.path.relpath(Path(path).resolve(), Path(start).resolve())).as_posix())
