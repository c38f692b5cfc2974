"""Static PNG export of plotly figures through kaleido, one browser for a whole batch.

Starting Chromium costs about two seconds; a report exports many figures, so
they all go through one kaleido session. Each PNG is written atomically.

A browser that dies under kaleido leaves kaleido's reader waiting for ever (this
process holds the other end of its pipe, so no end of file comes): a workflow
step, a SLURM job, hung with no browser left. So each batch renders in a child
process (``embprof.plots.render_worker``) given a deadline, killed with its
browser past it, and tried once more.
"""

from __future__ import annotations

import math
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from embprof.atomic import write_bytes
from embprof.errors import ExportError

# Debian's package installs /usr/bin/chromium; BROWSER_PATH overrides (choreographer's variable).
BROWSER_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
RENDER_TIMEOUT_S = 120.0
# A batch's deadline: the browser's start, then RENDER_TIMEOUT_S per round of tabs.
STARTUP_S = 60.0
ATTEMPTS = 2
# Tabs rendering at once; each is a renderer process, so more than the cores only queue.
MAX_TABS = 4


@dataclass(frozen=True)
class PngJob:
    fig: go.Figure
    path: Path
    scale: float = 1.0


def find_browser() -> str:
    """The Chromium kaleido should drive: ``$BROWSER_PATH``, else the first on ``PATH``."""
    explicit = os.environ.get("BROWSER_PATH")
    if explicit:
        if not (Path(explicit).is_file() and os.access(explicit, os.X_OK)):
            raise ExportError(f"BROWSER_PATH={explicit!r} is not an executable file")
        return explicit
    for name in BROWSER_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise ExportError(
        "no Chromium found for static figure export: install Debian's 'chromium' "
        "(make system-deps) or set BROWSER_PATH"
    )


def export_pngs(jobs: Sequence[PngJob]) -> None:
    """Render every job's figure to its PNG path in one browser session."""
    if not jobs:
        return
    browser = find_browser()
    deadline = STARTUP_S + RENDER_TIMEOUT_S * math.ceil(len(jobs) / tabs_for(len(jobs)))
    for attempt in range(1, ATTEMPTS + 1):
        try:
            images = _render_in_child(jobs, browser, deadline)
            break
        except _NoAnswer as failure:
            if attempt == ATTEMPTS:
                raise ExportError(f"static export failed {ATTEMPTS} times: {failure}") from None
    for job, image in zip(jobs, images, strict=True):
        write_bytes(job.path, image)


def tabs_for(figures: int) -> int:
    """Tabs rendering at once for a batch of ``figures``."""
    return max(1, min(figures, os.cpu_count() or 1, MAX_TABS))


class _NoAnswer(Exception):
    """The render worker gave no figures: it hung past its deadline or died."""


def _render_in_child(jobs: Sequence[PngJob], browser: str, deadline: float) -> list[bytes]:
    """The PNGs of ``jobs``, rendered by ``render_worker`` in a session of its own; raises _NoAnswer where it
    gave none by ``deadline``, ExportError where kaleido failed."""
    with tempfile.TemporaryDirectory(prefix="embprof-export-") as scratch:  # the browser's profile too
        folder = Path(scratch)
        (folder / "jobs.pickle").write_bytes(pickle.dumps(list(jobs)))
        child = subprocess.Popen(
            [sys.executable, "-m", "embprof.plots.render_worker", browser, scratch],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            env=_with_this_embprof(os.environ),
        )
        try:
            _, err = child.communicate(timeout=deadline)
            reason = f"the render worker exited with code {child.returncode} ({_last_line(err)})"
        except subprocess.TimeoutExpired:  # the result may be there still: closing the browser hangs too
            reason = f"the browser ({browser}) gave no figure within {deadline:.0f} s"
        finally:
            _end(child)
        result = folder / "result.pickle"
        if not result.exists():
            raise _NoAnswer(reason)
        status, payload = pickle.loads(result.read_bytes())
    if status != "ok":
        raise ExportError(f"static export failed: {payload}")
    return payload


def _with_this_embprof(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with the folder this embprof was imported from first on PYTHONPATH: the worker must run
    the same code as its caller, wherever the caller found it."""
    here = str(Path(__file__).resolve().parents[2])
    return {**environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, environ.get("PYTHONPATH")]))}


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "no output"


def _end(child: subprocess.Popen) -> None:
    """Kill the worker, if still there, and every process it started: choreographer starts the browser in a
    session of its own, so each of the worker's children goes with its whole process group. A worker that
    exited was reaped, and its pid may be another process's now: nothing is looked up by it."""
    if child.poll() is None:
        groups = {group for group in map(_group, _children(child.pid)) if group is not None}
        for group in groups | {child.pid}:  # the worker leads its own session
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    child.communicate()  # reaps it and closes its stderr pipe


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc; none where there is no /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
