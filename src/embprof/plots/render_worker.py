"""``python -m embprof.plots.render_worker BROWSER FOLDER``: render the PNG jobs pickled in
FOLDER/jobs.pickle through kaleido and pickle ("ok", [png bytes]) or ("error", one line) to
FOLDER/result.pickle, as soon as the figures are there. ``embprof.plots.export`` runs it as a child with a deadline (a browser
that dies under kaleido would leave the caller waiting for ever) and FOLDER as the temporary
directory, so the browser's profile goes with it.
"""

from __future__ import annotations

import asyncio
import pickle
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from embprof.atomic import write_bytes
from embprof.plots.export import RENDER_TIMEOUT_S, PngJob, tabs_for


async def render_into(jobs: Sequence[PngJob], browser: str, result: Path) -> None:
    """Render ``jobs`` and write ("ok", their PNGs) to ``result`` while the browser is still open (closing
    it has hung too)."""
    import kaleido  # imported here: it starts logging machinery on import

    # mathjax=False: the default loads MathJax from a CDN, which offline hosts cannot reach.
    async with kaleido.Kaleido(n=tabs_for(len(jobs)), timeout=RENDER_TIMEOUT_S, mathjax=False, path=browser) as k:
        images = list(await asyncio.gather(*(k.calc_fig(job.fig, opts=_opts(job)) for job in jobs)))
        write_bytes(result, pickle.dumps(("ok", images)))


def _opts(job: PngJob) -> dict[str, object]:
    layout = job.fig.layout
    opts: dict[str, object] = {"format": "png", "scale": job.scale}
    if layout.width and layout.height:
        opts |= {"width": layout.width, "height": layout.height}
    return opts


def main(browser: str, folder: str) -> None:
    tempfile.tempdir = folder
    jobs = pickle.loads(Path(folder, "jobs.pickle").read_bytes())
    result = Path(folder, "result.pickle")
    try:
        asyncio.run(render_into(jobs, browser, result))
    except Exception as exc:  # kaleido and choreographer raise many kinds; report one line
        if not result.exists():
            write_bytes(result, pickle.dumps(("error", f"{type(exc).__name__}: {exc}")))


if __name__ == "__main__":
    main(*sys.argv[1:3])
