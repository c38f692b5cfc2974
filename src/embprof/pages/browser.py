"""Open a page in headless Chromium through the DevTools protocol (choreographer, kaleido's driver).

The network is switched off before the page loads, so a page that needs anything
from outside (a CDN's plotly.js, MathJax) shows up as undrawn figures or errors.
The report's browser tests, its benchmark and the example's screenshot
(tools/publish_example.py) all open pages through it.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

from embprof.plots.export import find_browser

FIGURE_COUNTS = """JSON.stringify(Array.from(document.querySelectorAll('[data-figure]')).map(
  e => [e.dataset.figure, e.querySelectorAll('.main-svg').length,
        e.querySelectorAll('.js-plotly-plot').length]))"""
PAGE_HEIGHT = "Math.ceil(document.documentElement.scrollHeight)"
# Every collapsible section opened, as a reader who opens them all sees the page.
OPEN_ALL = """document.querySelectorAll('details').forEach(d => { d.open = true; }); true"""
OPEN_SECTIONS = "JSON.stringify(Array.from(document.querySelectorAll('details[open]')).map(d => d.id))"
# Tables wider than the box they sit in (their scroll container, else their parent), measured
# in the laid-out page: [class, table px, container px].
WIDE_TABLES = """JSON.stringify(Array.from(document.querySelectorAll('table')).map(t => {
  const box = t.parentElement;
  return [t.className || '(no class)', Math.ceil(t.getBoundingClientRect().width), box.clientWidth];
}).filter(([, width, room]) => width > room + 1))"""
# Figures whose drawing is wider than their box (a clipped legend or axis): [id, svg px, box px].
WIDE_FIGURES = """JSON.stringify(Array.from(document.querySelectorAll('[data-figure]')).map(e => {
  const svg = e.querySelector('.main-svg');
  return [e.dataset.figure, svg ? Math.ceil(svg.getBoundingClientRect().width) : 0, e.clientWidth];
}).filter(([, width, room]) => width > room + 1))"""
# Table cells narrower than 3 characters of text while holding more (a squeezed column).
SQUEEZED_CELLS = """JSON.stringify(Array.from(document.querySelectorAll('td')).filter(td =>
  td.textContent.trim().length > 3 && td.getBoundingClientRect().width > 0 &&
  td.getBoundingClientRect().width < 3.5 * parseFloat(getComputedStyle(td).fontSize)
).slice(0, 20).map(td => [td.closest('table').className, td.textContent.trim().slice(0, 40),
                          Math.round(td.getBoundingClientRect().width)]))"""
WIDTH = 1400


@dataclass
class PageCheck:
    """What the browser saw: errors, requests, figures drawn, what overflows its box, the height."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    figures: list[tuple[str, int, int]] = field(default_factory=list)
    wide_tables: list[tuple[str, int, int]] = field(default_factory=list)
    wide_figures: list[tuple[str, int, int]] = field(default_factory=list)
    squeezed: list[tuple[str, str, int]] = field(default_factory=list)
    height: int = 0
    open_sections: list[str] = field(default_factory=list)


async def _evaluate(tab, expression: str):
    reply = await tab.send_command(
        "Runtime.evaluate", params={"expression": expression, "returnByValue": True}
    )
    return reply["result"]["result"]["value"]


async def open_page(
    page: Path,
    screenshot: Path,
    settle_s: float = 20.0,
    open_all: bool = True,
    max_height: int | None = None,
    fragment: str = "",
) -> PageCheck:
    """Load ``page`` (with ``fragment``, e.g. ``#config-...``) with the network off, open every
    collapsible section (``open_all``), wait until plotly drew every figure, measure tables and
    figures against their boxes, screenshot it (its top ``max_height`` px; default all of it)."""
    import choreographer

    check = PageCheck()

    async def on_console(event):
        params = event["params"]
        if params["type"] in ("error", "assert"):
            check.errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )

    async def on_exception(event):
        details = event["params"]["exceptionDetails"]
        check.errors.append(details.get("exception", {}).get("description", details["text"]))

    async def on_log(event):
        entry = event["params"]["entry"]
        if entry["level"] == "error":
            check.errors.append(f"{entry['source']}: {entry['text']}")

    async def on_request(event):
        check.requests.append(event["params"]["request"]["url"])

    async with choreographer.Browser(path=find_browser(), headless=True) as browser:
        tab = browser.get_tab()
        await tab.send_command(
            "Emulation.setDeviceMetricsOverride",
            params={"width": WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )
        tab.subscribe("Runtime.consoleAPICalled", on_console)
        tab.subscribe("Runtime.exceptionThrown", on_exception)
        tab.subscribe("Log.entryAdded", on_log)
        tab.subscribe("Network.requestWillBeSent", on_request)
        for domain in ("Runtime", "Log", "Page", "Network"):
            await tab.send_command(f"{domain}.enable")
        await tab.send_command(
            "Network.emulateNetworkConditions",
            params={
                "offline": True,
                "latency": 0,
                "downloadThroughput": -1,
                "uploadThroughput": -1,
            },
        )
        loaded = tab.subscribe_once("Page.loadEventFired")
        await tab.send_command("Page.navigate", params={"url": page.as_uri() + fragment})
        await asyncio.wait_for(loaded, settle_s)
        while await _evaluate(tab, "document.readyState") != "complete":
            await asyncio.sleep(0.1)
        if open_all:
            await _evaluate(tab, OPEN_ALL)
        deadline = asyncio.get_running_loop().time() + settle_s
        while True:
            check.figures = [tuple(f) for f in json.loads(await _evaluate(tab, FIGURE_COUNTS))]
            drawn = all(svgs > 0 for _, svgs, _ in check.figures)
            if drawn or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # the opened sections' figures resize on their toggle events
        check.wide_tables = [tuple(t) for t in json.loads(await _evaluate(tab, WIDE_TABLES))]
        check.wide_figures = [tuple(f) for f in json.loads(await _evaluate(tab, WIDE_FIGURES))]
        check.squeezed = [tuple(c) for c in json.loads(await _evaluate(tab, SQUEEZED_CELLS))]
        check.open_sections = json.loads(await _evaluate(tab, OPEN_SECTIONS))
        height = check.height = await _evaluate(tab, PAGE_HEIGHT)
        if max_height is not None:
            height = min(height, max_height)
        shot = await tab.send_command(
            "Page.captureScreenshot",
            params={
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1},
            },
        )
        screenshot.write_bytes(base64.b64decode(shot["result"]["data"]))
    return check
