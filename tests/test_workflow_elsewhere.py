"""The workflow run from outside its checkout: straight from its Snakefile, and as a Snakemake
module of a deploying workflow (docs/USAGE.md), with the Snakemake report of the results.

These use the checkout itself (not a copy): the working directory is the only
thing that moves, and nothing may be written into the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
TINY = yaml.safe_load((REPO / ".test" / "config_tiny" / "config.yaml").read_text())
ONE = "T2_totalB1024_D16_sgd_gpu_pool=none_cap=1K"
MODULE = """configfile: "config/config.yaml"


module embprof:
    snakefile:
        {snakefile!r}
    config:
        config


use rule * from embprof as embprof_*
"""


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EMBPROF_PROFILER"}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def checkout_state() -> str:
    """What git sees in the checkout (untracked files included): a run elsewhere leaves it alone."""
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


def test_dry_run_from_an_empty_directory_uses_the_checkouts_config(tmp_path: Path) -> None:
    before = checkout_state()
    done = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "-n", "report", "--config", "profiler=torch")
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    assert "checkpoint collect:" in out and "Job stats:" in out
    # The suite is named relative to the working directory, so a run elsewhere finds it.
    assert f"--suite-root {os.path.relpath(REPO, tmp_path)}" in out
    assert checkout_state() == before


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A deploying workflow: its Snakefile uses this one as a module, its config/ holds the tiny
    config (one config) and its own kernel categories; one real run."""
    work = tmp_path_factory.mktemp("deploy")
    (work / "Snakefile").write_text(MODULE.format(snakefile=str(REPO / "Snakefile")))
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(TINY | {"labels": ["_sgd_gpu_"]}))
    (work / "config" / "kernel_categories.yaml").write_text(
        "unmatched: none-of-ours\ncategories:\n  - name: deployed-category\n    patterns: ['.']\n"
    )
    before = checkout_state()
    done = snakemake(work, "--cores", "2", "--printshellcmds")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert checkout_state() == before
    return work


@pytest.mark.slow
@pytest.mark.e2e
def test_a_module_run_writes_every_output_in_its_own_directory(deployed: Path) -> None:
    results = deployed / "results"
    assert (results / "report" / "index.html").stat().st_size > 0
    assert (results / "sunburst" / f"{ONE}.png").stat().st_size > 0
    assert (results / "bandwidth" / f"bandwidth__{ONE}.csv").stat().st_size > 0
    # The deploying workflow's config/ overrides the packaged kernel categories.
    csv = (results / "opcalls" / f"opcalls__{ONE}.csv").read_text()
    assert ",deployed-category" in csv
    # Every job ran as `embprof <step>`; the log holds the command to re-run it by hand.
    log = next((deployed / ".snakemake" / "log").glob("*.snakemake.log")).read_text()
    assert "embprof breakdown results/traces/" in log and "rule embprof_breakdown:" in log


@pytest.mark.slow
@pytest.mark.e2e
def test_snakemake_report_without_cores_holds_the_figures_and_the_report(deployed: Path) -> None:
    done = snakemake(deployed, "--report", "report.zip")
    assert done.returncode == 0, done.stderr[-3000:]
    with zipfile.ZipFile(deployed / "report.zip") as archive:
        files = {Path(name).name for name in archive.namelist()}
        page = archive.read("report/report.html").decode()
    assert {"latency.png", "index.html", f"{ONE}.png", "report.html"} <= files
    assert f"Where one iteration of config {ONE} goes" in page  # the sunburst's caption
    assert "embprof profiled every benchmark config" in page  # the workflow's description
    # A second run with nothing changed does nothing.
    again = snakemake(deployed, "-n", "--cores", "1")
    assert "Nothing to be done" in again.stdout + again.stderr
