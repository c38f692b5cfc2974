"""Static PNG export of plotly figures through kaleido, one browser for a whole batch.

Starting Chromium costs about two seconds; a report exports many figures, so
they all go through one kaleido session. Each PNG is written atomically.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from embprof.atomic import write_bytes
from embprof.errors import EmbprofError

# Debian's package installs /usr/bin/chromium; BROWSER_PATH overrides (choreographer's variable).
BROWSER_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
RENDER_TIMEOUT_S = 120.0
# Tabs rendering at once; each is a renderer process, so more than the cores only queue.
MAX_TABS = 4


class ExportError(EmbprofError):
    """Static export could not run (no browser) or a figure failed to render."""


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
    try:
        images = asyncio.run(_render_all(jobs, browser))
    except ExportError:
        raise
    except Exception as exc:  # kaleido and choreographer raise many kinds; report one line
        raise ExportError(f"static export failed: {type(exc).__name__}: {exc}") from exc
    for job, image in zip(jobs, images, strict=True):
        write_bytes(job.path, image)


async def _render_all(jobs: Sequence[PngJob], browser: str) -> list[bytes]:
    import kaleido  # imported here: it starts logging machinery on import

    tabs = max(1, min(len(jobs), os.cpu_count() or 1, MAX_TABS))
    # mathjax=False: the default loads MathJax from a CDN, which offline hosts cannot reach.
    async with kaleido.Kaleido(n=tabs, timeout=RENDER_TIMEOUT_S, mathjax=False, path=browser) as k:
        return list(await asyncio.gather(*(k.calc_fig(job.fig, opts=_opts(job)) for job in jobs)))


def _opts(job: PngJob) -> dict[str, object]:
    layout = job.fig.layout
    opts: dict[str, object] = {"format": "png", "scale": job.scale}
    if layout.width and layout.height:
        opts |= {"width": layout.width, "height": layout.height}
    return opts
