"""Publish a GPU run as the committed example: the figures and the report drawn from its measured
files, the example's folder replaced wholesale, the docs' figures rewritten from it.

    python tools/publish_example.py OUT/results.tgz [--example examples/h200] [--cores 2] [--screenshot PNG]

``results.tgz`` is what ``tools/gpu_host/run_example.sh`` packed on the GPU host
(``results/`` without its traces). On this machine, which has a browser:

1. the run must have been measured at this checkout's HEAD, from a clean tree
   (its ``environment.json`` provenance says so), so that nothing in the
   example is older than the commit its README names;
2. in a scratch copy of ``results/``, ``snakemake -n measure`` must find nothing
   to do (nothing is measured again, here or by accident), then ``snakemake
   report`` draws the sunbursts, the latency and bandwidth charts and the report;
3. ``embprof checks`` writes ``CHECKS.md``; the report's screenshot goes to
   ``docs/img/report_h200.png``;
4. the example's measured files are swapped in at once (the old folder kept
   aside until the new one is in place; the example's own texts, README.md
   and config.yaml, stay), and ``tools/docs_figures.py`` rewrites every figure
   the docs quote.

Any failure stops before the example is touched, with one line naming its log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from embprof.pages.browser import open_page
from embprof.results.environment import read_environment
from embprof.results.provenance import read_provenance

ROOT = Path(__file__).resolve().parents[1]

# What a published example holds from the run (the rest of results/ is scratch or traces).
MEASURED = ("benchmark_results.json", "environment.json", "configs.tsv", "peak_bandwidth.json", "opcalls", "bandwidth")
# What a run may hold besides: the breakdowns users already have, beside ours (reference_breakdowns.sh).
MEASURED_IF_PRESENT = ("crosscheck",)
DRAWN = ("report",)
KEPT = ("README.md", "config.yaml")  # the example's own texts: its README's figures are generated
SCREENSHOT = ROOT / "docs/img/report_h200.png"
SCREENSHOT_HEIGHT = 2200  # the summary, the latency chart and the first config: what a reader sees first


class PublishError(Exception):
    """Why the run cannot become the example; the example is left as it was."""


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def unpack(archive: Path, into: Path) -> Path:
    """``results/`` out of ``archive`` into ``into``; members outside it are refused."""
    try:
        with tarfile.open(archive) as tar:
            names = tar.getnames()
            if not names or any(not (n == "results" or n.startswith("results/")) for n in names):
                raise PublishError(f"{archive}: not a packed results/ folder (run_example.sh's results.tgz)")
            tar.extractall(into, filter="data")
    except (OSError, tarfile.TarError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise PublishError(f"{archive}: cannot unpack ({first.rstrip(':')}): not a gzipped tar") from None
    results = into / "results"
    missing = [m for m in MEASURED if not (results / m).exists()]
    if missing:
        raise PublishError(f"{archive}: the run is incomplete, results/ lacks {', '.join(missing)}")
    return results


def check_commit(results: Path, head: str) -> str:
    """The run's commit, which must be HEAD and clean: the example names one commit for everything in it."""
    try:
        provenance = read_provenance(read_environment(results / "environment.json"))
    except Exception as error:  # noqa: BLE001 - any unreadable environment is one line
        raise PublishError(f"environment.json: {error}") from None
    commit = provenance["git_commit"]
    if commit is None:
        raise PublishError(f"the run does not say which commit it measured ({provenance['null_reasons']['git_commit']}); "
                           "stamp the copy with tools/gpu_host/stamp.sh")
    if commit != head:
        raise PublishError(f"the run measured {commit[:12]}, this checkout is at {head[:12]}: "
                           f"publish from a checkout of {commit[:12]}, or measure HEAD")
    if provenance["git_dirty"] is not False:
        raise PublishError(f"the run's checkout of {commit[:12]} had uncommitted changes (git_dirty: {provenance['git_dirty']})")
    return commit


def snakemake(workdir: Path, config: Path, log: Path, *args: str) -> str:
    """This checkout's workflow on ``workdir``'s results/; its output, or one line naming ``log``."""
    command = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
               "--configfile", str(config), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise PublishError(f"snakemake {' '.join(args)} failed (exit {done.returncode}); see {log}")
    return done.stdout + done.stderr


def draw(workdir: Path, config: Path, cores: int, logs: Path) -> None:
    """The figures and the report, after making sure that nothing would be measured."""
    planned = snakemake(workdir, config, logs / "dry-run-measure.log", "-n", "measure")
    if "Nothing to be done" not in planned:
        raise PublishError(f"the run is not complete here: snakemake would measure again; see {logs / 'dry-run-measure.log'}")
    snakemake(workdir, config, logs / "report.log", "--cores", str(cores), "report")
    checks = subprocess.run([sys.executable, "-m", "embprof", "checks", str(workdir / "results"),
                             "--out", str(workdir / "CHECKS.md")], capture_output=True, text=True, check=False)
    if checks.returncode != 0:
        last = ((checks.stderr or checks.stdout).strip().splitlines() or [f"exit {checks.returncode}"])[-1]
        raise PublishError(f"embprof checks failed: {last}")


def screenshot(report: Path, out: Path) -> None:
    """The report's first screen, opened offline in headless Chromium (the README's picture)."""
    check = asyncio.run(open_page(report, out, max_height=SCREENSHOT_HEIGHT))
    if check.errors:
        raise PublishError(f"{report}: the page logged errors in the browser: {check.errors[0]}")


def assemble(workdir: Path, example: Path, stage: Path) -> None:
    """The new example folder: the run's measured and drawn files, CHECKS.md, the example's own texts."""
    stage.mkdir()
    results = workdir / "results"
    present = [name for name in MEASURED_IF_PRESENT if (results / name).exists()]
    for name in (*MEASURED, *present, *DRAWN):
        source = results / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, stage / name)
    shutil.copy2(workdir / "CHECKS.md", stage / "CHECKS.md")
    for name in KEPT:
        if (example / name).exists():
            shutil.copy2(example / name, stage / name)


def swap(stage: Path, example: Path, scratch: Path) -> None:
    """Put ``stage`` where ``example`` is, keeping the old one aside until the new one is in place."""
    aside = scratch / "previous"
    if example.exists():
        example.rename(aside)
    try:
        stage.rename(example)
    except OSError:
        if aside.exists():
            aside.rename(example)
        raise


def publish(archive: Path, example: Path, cores: int, head: str, screenshot_to: Path = SCREENSHOT,
            rewrite_docs: bool = True) -> str:
    """Replace ``example`` with the run in ``archive``, measured at ``head``; returns its commit."""
    example = example.resolve()
    if not (example / "config.yaml").is_file():
        raise PublishError(f"{example}: no config.yaml (the config the example is measured with)")
    with tempfile.TemporaryDirectory(prefix=".publish-", dir=example.parent) as tmp:
        scratch = Path(tmp)
        workdir = scratch / "run"
        workdir.mkdir()
        results = unpack(archive, workdir)
        commit = check_commit(results, head)
        logs = Path(tempfile.mkdtemp(prefix="publish-example-logs-"))  # kept when a step fails
        draw(workdir, example / "config.yaml", cores, logs)
        shot = scratch / "report.png"
        screenshot(workdir / "results/report/index.html", shot)
        assemble(workdir, example, scratch / "example")
        shutil.rmtree(logs)
        swap(scratch / "example", example, scratch)
        shutil.copy2(shot, screenshot_to)
    if not rewrite_docs:
        return commit
    figures = subprocess.run([sys.executable, str(ROOT / "tools/docs_figures.py")], capture_output=True, text=True, check=False)
    if figures.returncode != 0:
        raise PublishError(f"the example is in place but the docs' figures are not: {figures.stderr.strip()}")
    return commit


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path, help="run_example.sh's results.tgz")
    parser.add_argument("--example", type=Path, default=ROOT / "examples/h200", help="the example folder to replace")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--screenshot", type=Path, default=SCREENSHOT,
                        help="where the report's first screen goes (default: the README's picture)")
    args = parser.parse_args(argv)
    try:
        commit = publish(args.archive, args.example, args.cores, head=_git("rev-parse", "HEAD"),
                         screenshot_to=args.screenshot)
    except PublishError as error:
        print(f"publish_example: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"published": str(args.example), "commit": commit}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
