"""Open a page in headless Chromium through the DevTools protocol (choreographer, kaleido's driver).

The network is switched off before the page loads, so a page that needs anything
from outside (a CDN's plotly.js, MathJax) shows up as undrawn figures or errors.
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
WIDTH = 1400


@dataclass
class PageCheck:
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    figures: list[tuple[str, int, int]] = field(default_factory=list)


async def _evaluate(tab, expression: str):
    reply = await tab.send_command(
        "Runtime.evaluate", params={"expression": expression, "returnByValue": True}
    )
    return reply["result"]["result"]["value"]


async def open_page(page: Path, screenshot: Path, settle_s: float = 20.0, max_height: int | None = None) -> PageCheck:
    """Load ``page`` with the network off, wait until plotly drew every figure, screenshot it
    (the whole page, or its top ``max_height`` pixels)."""
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
        await tab.send_command("Page.navigate", params={"url": page.as_uri()})
        await asyncio.wait_for(loaded, settle_s)
        deadline = asyncio.get_running_loop().time() + settle_s
        while True:
            check.figures = [tuple(f) for f in json.loads(await _evaluate(tab, FIGURE_COUNTS))]
            drawn = all(svgs > 0 for _, svgs, _ in check.figures)
            if drawn or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.2)
        height = await _evaluate(tab, PAGE_HEIGHT)
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
