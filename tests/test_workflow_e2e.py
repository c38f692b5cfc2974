"""The workflow end to end: real Snakemake runs of the real benchmark on a tiny config.

One run (module fixture) profiles two smoke configs with the torch profiler
and one config whose benchmark command fails; the other tests ask Snakemake
what it would re-run after a change (its dry run is the decision it acts on).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from html import unescape
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = ("Snakefile", "rules", "report", "config", "envs", "profiles", "suite", "src", ".test")
TINY = REPO / ".test" / "config_tiny" / "config.yaml"
CRASH_LABEL = "T2_totalB1024_D16_sgd_no_caching_pool=none_cap=4K"
GOOD_LABELS = ("T2_totalB1024_D16_sgd_gpu_pool=none_cap=1K", "T2_totalB1024_D16_sgd_no_hbm_pool=none_cap=4K")
PER_CONFIG_RULES = {"profile", "export", "breakdown", "sunburst", "bandwidth", "timing"}
# The executor plugin, installed apart from the venv (`make slurm`) so that only SLURM runs load it.
SLURM_PLUGIN = Path(sys.prefix) / "slurm"
_JOB = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
_LABEL = re.compile(r"^\s+wildcards: label=(\S+)$")


def screenshots(tmp_path: Path) -> Path:
    """Where a test saves the screenshots the docs show: docs/img with EMBPROF_DOCS_SCREENSHOTS=1
    set (then commit them), else the test's own temporary folder."""
    if os.environ.get("EMBPROF_DOCS_SCREENSHOTS") == "1":
        return Path(__file__).resolve().parents[1] / "docs" / "img"
    return tmp_path


def copy_workflow(dst: Path) -> Path:
    """A checkout-like copy: the workflow's files only, with fresh mtimes (as a clone has)."""
    dst.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in WORKFLOW_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dst / part, ignore=ignore, copy_function=shutil.copy)
        else:
            shutil.copy(src, dst / part)
    return dst


def snakemake(
    workdir: Path, *args: str, timeout: int = 600, slurm: bool = False
) -> subprocess.CompletedProcess[str]:
    """Snakemake in a copy of the workflow, running that copy's embprof package (as its own venv
    would); ``slurm``: with the SLURM executor plugin on the path (profiles/slurm/README.md)."""
    env = {k: v for k, v in os.environ.items() if k != "EMBPROF_PROFILER"}
    paths = [str(workdir / "src"), str(SLURM_PLUGIN) if slurm else "", env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=workdir, env=env,
        capture_output=True, text=True, timeout=timeout, check=False,
    )


def planned_jobs(output: str) -> Counter[tuple[str, str | None]]:
    """(rule, label) of every job a dry run lists."""
    jobs: Counter[tuple[str, str | None]] = Counter()
    rule: str | None = None
    label: str | None = None
    for line in [*output.splitlines(), ""]:
        if (m := _JOB.match(line)) or not line.strip():
            if rule is not None:
                jobs[(rule, label)] += 1
            rule, label = (m[1], None) if m else (None, None)
        elif rule is not None and (m := _LABEL.match(line)):
            label = m[1]
    return jobs


def assert_nothing_to_do(run: subprocess.CompletedProcess[str]) -> None:
    """Snakemake ran and had no job to run (else the jobs it planned are the message)."""
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Nothing to be done" in run.stdout + run.stderr, planned_jobs(run.stdout)


def dry_run_with_edit(workdir: Path, changed: Path, config: Path) -> str:
    """What a dry run of ``report`` plans with one file of ``workdir`` edited (then put back)."""
    original = changed.read_bytes()
    try:
        changed.write_bytes(original + b"\n# an edit\n")
        done = snakemake(workdir, "-n", "--cores", "1", "report", "--configfile", str(config))
    finally:
        changed.write_bytes(original)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def checkout_with_results(workdir: Path, dst: Path) -> Path:
    """A fresh copy of the workflow at ``dst`` with a copy of ``workdir``'s results/ beside it."""
    fresh = copy_workflow(dst)
    subprocess.run(["cp", "-a", str(workdir / "results"), str(fresh / "results")], check=True)
    return fresh


def write_config(path: Path, **changes: object) -> Path:
    config = yaml.safe_load(TINY.read_text())
    config.update(changes)
    path.write_text(yaml.safe_dump(config))
    return path


def crash_config(path: Path, overrides: dict | None = None) -> Path:
    """The tiny config plus one config whose benchmark command fails (an invalid option)."""
    config = yaml.safe_load(TINY.read_text())
    return write_config(
        path,
        labels=[*config["labels"], "_sgd_no_caching_"],
        overrides={"_no_caching_": {"extra_args": ["--alpha=-1"]}, **(overrides or {})},
    )


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    workdir = copy_workflow(tmp_path_factory.mktemp("wf"))
    config = crash_config(workdir / "crash.yaml")
    done = snakemake(workdir, "--cores", "2", "report", "--configfile", str(config))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return workdir, config


@pytest.mark.slow
@pytest.mark.e2e
def test_crashing_config_is_reported_and_the_others_complete(tiny_run: tuple[Path, Path]) -> None:
    workdir, _ = tiny_run
    results = workdir / "results"
    table = (results / "configs.tsv").read_text().splitlines()
    assert table[0] == "test_id\tlabel" and len(table) == 4
    for label in GOOD_LABELS:
        status = json.loads((results / "status" / f"{label}.json").read_text())
        assert status["ok"] and status["failed_step"] is None
        assert (results / "traces" / f"{label}.kineto.json.gz").stat().st_size > 0
        assert (results / "opcalls" / f"opcalls__{label}.csv").stat().st_size > 0
        assert (results / "sunburst" / f"{label}.png").stat().st_size > 0
        assert (results / "bandwidth" / f"bandwidth__{label}.csv").stat().st_size > 0
        [record] = json.loads((results / "timing" / f"{label}.json").read_text())
        assert record["label"] == label and record["dyn_train_ms"] > 0
    failed = json.loads((results / "status" / f"{CRASH_LABEL}.json").read_text())
    assert failed["ok"] is False and failed["failed_step"] == "profile"
    assert failed["returncode"] != 0 and failed["log"] == f"results/logs/profile/{CRASH_LABEL}.log"
    assert "--alpha must be positive" in failed["log_tail"]
    assert failed["steps"]["timing"]["ok"] is False
    assert (results / "traces" / f"{CRASH_LABEL}.kineto.json.gz").stat().st_size == 0
    assert not (results / "opcalls" / f"opcalls__{CRASH_LABEL}.csv").exists()
    assert not (results / "bandwidth" / f"bandwidth__{CRASH_LABEL}.csv").exists()
    assert json.loads((results / "timing" / f"{CRASH_LABEL}.json").read_text()) == []
    aggregated = json.loads((results / "benchmark_results.json").read_text())
    assert sorted(r["label"] for r in aggregated) == sorted(GOOD_LABELS)
    html = (results / "report" / "index.html").read_text()
    assert CRASH_LABEL in html and "--alpha must be positive" in html
    env = json.loads((results / "environment.json").read_text())
    assert env["device"] == "cpu" and env["profiler"] == "torch" and env["preset"] == "smoke"
    # Progress reached the logs while the benchmark ran (its own output, unbuffered).
    assert "passed" in (results / "logs" / "timing" / f"{GOOD_LABELS[0]}.log").read_text()


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.browser
def test_the_smoke_runs_report_draws_offline_and_holds_its_layout(tiny_run: tuple[Path, Path], tmp_path: Path) -> None:
    """The report a real run wrote, opened in headless Chromium with the network off at a 1400 px
    window, every section open: no console error, every figure drawn, no table wider than its box;
    the links to each config's files lead to files of the run."""
    import asyncio

    from test_report_browser import assert_layout_holds

    from embprof.pages.browser import open_page

    workdir, _ = tiny_run
    index = workdir / "results" / "report" / "index.html"
    check = asyncio.run(open_page(index, shot := screenshots(tmp_path) / "report.png", max_height=2400))
    assert check.errors == []
    assert [url for url in check.requests if url.startswith(("http:", "https:"))] == []
    names = {name for name, _, _ in check.figures}
    # latency, the step budget, and per good config: two sunbursts and dyn against TBE (the
    # bandwidth chart only where an op has a bytes formula: on the CPU TBE's have none)
    assert {"latency-plot", "budget-plot"} <= names and len(names) >= 2 + 3 * len(GOOD_LABELS)
    assert all(svgs >= 1 and plots == 1 for _, svgs, plots in check.figures), check.figures
    assert_layout_holds(check)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = index.read_text()
    hrefs = re.findall(r'<p class="links">(.*?)</p>', html, re.S)
    assert len(hrefs) == len(GOOD_LABELS) + 1  # the crashed config links its logs and status
    for href in re.findall(r'href="([^"]+)"', "".join(hrefs)):
        assert (index.parent / unquote(unescape(href))).is_file(), href
    for label in GOOD_LABELS:
        assert f"../traces/{label}.kineto.json.gz".replace("=", "%3D") in html
        # the sidecar splits the profiled step: busy, idle between its work, host only
        busy = json.loads((workdir / "results" / "opcalls" / f"opcalls__{label}.busy.json").read_text())
        for backend, ms in busy["busy_ms_per_iter"].items():
            idle = busy["idle_ms_per_iter"][backend]
            assert 0 <= idle and ms + idle <= busy["range_ms_per_iter"][backend] * (1 + 1e-9)
            assert busy["top_kernels"][backend][0]["ms_per_iter"] > 0
        # each op's own host time beside its device time; none for work under no op
        rows = pd.read_csv(workdir / "results" / "opcalls" / f"opcalls__{label}.csv")
        under_op = rows["fallback_category"].isna()
        assert (rows.loc[under_op, "cpu_ms_per_iter"] > 0).all() and rows.loc[~under_op, "cpu_ms_per_iter"].isna().all()
    budget = html[html.index('<section id="budget">'):]
    assert "idle in range ms" in budget[: budget.index("</section>")]
    assert html.count("<h4>Top kernels</h4>") == len(GOOD_LABELS)


@pytest.mark.slow
@pytest.mark.e2e
def test_the_report_summary_table_and_the_database_agree(tiny_run: tuple[Path, Path]) -> None:
    """Both from the tiny run: every number of the report's summary table, as the function that
    builds it gives them from the run's files, equals the database's ``summary`` view."""
    from embprof.report.tables import headline
    from embprof.results.configs import read_configs
    from embprof.results.paths import ResultsPaths
    from embprof.results.records import read_results
    from embprof.results.steps import read_statuses

    workdir, _ = tiny_run
    paths = ResultsPaths(workdir / "results")
    records = {r["label"]: r for r in read_results(paths.benchmark_results)}
    labels = sorted({c.label for c in read_configs(paths.configs)} | set(records))
    failed = {
        label: s["failed_step"] for label, s in read_statuses(paths.status_dir).items()
        if not s["ok"] and label in labels
    }
    report = headline(labels, records, failed)
    with sqlite3.connect(paths.database) as con:
        [(run_id,)] = con.execute("SELECT value FROM meta WHERE key = 'own_run'").fetchall()
        view = pd.read_sql_query("SELECT * FROM summary WHERE run_id = ? ORDER BY label", con, params=[run_id])
        opcalls = dict(con.execute("SELECT label, count(*) FROM opcalls GROUP BY label").fetchall())
        [crashed] = con.execute("SELECT status, failed_step FROM configs WHERE label = ?", [CRASH_LABEL]).fetchall()
    assert labels == sorted([*GOOD_LABELS, CRASH_LABEL]) and list(view["label"]) == labels
    assert set(report.columns) <= set(view.columns), set(report.columns) - set(view.columns)
    assert report.loc[report["label"] != CRASH_LABEL, "dyn_train_ms"].gt(0).all()
    # SQLite has no column types in a view: a column null in every row reads back as None
    # objects, the same missing number the report holds as NaN.
    in_report_types = view[list(report.columns)].astype(report.dtypes.to_dict())
    pd.testing.assert_frame_equal(in_report_types, report, check_dtype=False)
    assert crashed == ("failed", "profile") and set(opcalls) == set(GOOD_LABELS)


@pytest.mark.slow
@pytest.mark.e2e
def test_second_run_does_nothing(tiny_run: tuple[Path, Path]) -> None:
    workdir, config = tiny_run
    assert_nothing_to_do(snakemake(workdir, "--cores", "1", "report", "--configfile", str(config)))


@pytest.mark.slow
@pytest.mark.e2e
def test_one_config_params_rerun_only_that_config_and_aggregates(
    tiny_run: tuple[Path, Path], tmp_path: Path
) -> None:
    workdir, _ = tiny_run
    own = tmp_path / "wf"
    subprocess.run(["cp", "-a", str(workdir), str(own)], check=True)  # results and metadata
    changed = GOOD_LABELS[0]
    config = crash_config(
        own / "changed.yaml",
        overrides={"_sgd_gpu_": {"num_iterations": 3, "profile_iterations": 3, "repeats": 4}},
    )
    done = snakemake(own, "--cores", "2", "report", "--configfile", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = planned_jobs(done.stdout + done.stderr)
    assert {label for (rule, label) in jobs if rule in PER_CONFIG_RULES} == {changed}
    assert {rule for rule, _ in jobs} == {
        "profile", "breakdown", "sunburst", "bandwidth", "timing", "status",
        "aggregate", "environment", "latency_plot", "bandwidth_plot", "database", "report",
    }
    # The database is upserted: the changed config's rows replaced, the others' left alone.
    database = own / "results" / "embprof.sqlite"
    assert (own / "results" / "logs" / "database.log").read_text().strip().endswith(
        "1 config(s) written, 2 unchanged, 0 removed")
    with sqlite3.connect(database) as con:
        assert con.execute("SELECT count(*) FROM timings WHERE label = ? AND n = 4", [changed]).fetchone() == (8,)
    [record] = json.loads((own / "results" / "timing" / f"{changed}.json").read_text())
    assert record["num_iterations"] == 3
    assert record["repeats"] == 4 and len(record["timings"]["dyn_eval_ms"]["repeats"]) == 4


@pytest.mark.slow
@pytest.mark.e2e
def test_sunburst_code_change_rerenders_sunbursts_and_report_only(
    tiny_run: tuple[Path, Path],
) -> None:
    workdir, config = tiny_run
    package = workdir / "src" / "embprof"
    for changed, rerun in [
        (package / "cli" / "sunburst.py", {("sunburst", label): 1 for label in GOOD_LABELS}),
        # The report's page is not the sunbursts' code: editing it re-renders no sunburst.
        (package / "report" / "templates" / "report.html.j2", {}),
    ]:
        assert planned_jobs(dry_run_with_edit(workdir, changed, config)) == Counter(rerun | {("report", None): 1}), changed
    # Same content again (only the mtime moved): nothing to do.
    assert_nothing_to_do(snakemake(workdir, "-n", "--cores", "1", "report", "--configfile", str(config)))


@pytest.mark.slow
@pytest.mark.e2e
def test_results_copied_beside_a_fresh_checkout_rerun_nothing(
    tiny_run: tuple[Path, Path], tmp_path: Path
) -> None:
    workdir, config = tiny_run
    fresh = checkout_with_results(workdir, tmp_path / "fresh")
    # Per-config jobs asked for first, in a clone without .snakemake/: each job's settings plan is
    # there before Snakemake lists its folder (one written after was taken as a missing input).
    steps = [f"results/steps/{step}/{label}.json" for label in GOOD_LABELS for step in ("profile", "timing")]
    assert_nothing_to_do(snakemake(fresh, "-n", "--cores", "1", *steps, "--configfile", str(config)))
    assert_nothing_to_do(snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", str(config)))
    # A folder from before settings were recorded: taken as it is, and a dry run writes nothing there.
    shutil.rmtree(fresh / "results" / "settings")
    assert_nothing_to_do(snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", str(config)))
    assert not (fresh / "results" / "settings").exists()
    assert_nothing_to_do(snakemake(fresh, "--cores", "1", "report", "--configfile", str(config)))
    assert (fresh / "results" / "settings" / "report.json").is_file()  # a run fills them in


def _settings(results: Path) -> dict[str, bytes]:
    return {str(p.relative_to(results)): p.read_bytes() for p in sorted((results / "settings").rglob("*.json"))}


def _rerun_labels(jobs: Counter, rules: set[str]) -> set[str | None]:
    return {label for rule, label in jobs if rule in rules}


@pytest.mark.slow
@pytest.mark.e2e
def test_a_run_stopped_on_the_lock_changes_no_recorded_setting(tiny_run: tuple[Path, Path], tmp_path: Path) -> None:
    """Issue 34, case 2: a second run that stopped on the lock had rewritten results/settings/, and a
    run with the old settings then took outputs made with others as current, or the other way round."""
    workdir, config = tiny_run
    own = tmp_path / "wf"
    subprocess.run(["cp", "-a", str(workdir), str(own)], check=True)
    before = _settings(own / "results")
    changed = crash_config(own / "changed.yaml", overrides={"_sgd_gpu_": {"profile_iterations": 3}})
    (own / ".snakemake" / "locks").mkdir(parents=True, exist_ok=True)
    (own / ".snakemake" / "locks" / "0.output.lock").write_text("results/report/index.html\n")  # another run holds it
    stopped = snakemake(own, "--cores", "1", "report", "--configfile", str(changed))
    assert stopped.returncode != 0 and "LockException" in stopped.stdout + stopped.stderr
    assert _settings(own / "results") == before
    (own / ".snakemake" / "locks" / "0.output.lock").unlink()
    assert_nothing_to_do(snakemake(own, "-n", "--cores", "1", "report", "--configfile", str(config)))
    again = snakemake(own, "-n", "--cores", "1", "report", "--configfile", str(changed))
    assert _rerun_labels(planned_jobs(again.stdout), {"profile"}) == {GOOD_LABELS[0]}


@pytest.mark.slow
@pytest.mark.e2e
def test_a_changed_setting_reruns_in_a_copy_whatever_its_timestamps(tiny_run: tuple[Path, Path], tmp_path: Path) -> None:
    """Issue 34, case 2: a copy marked up to date with --touch (as the docs advise for one that lost
    its timestamps) re-ran nothing after a settings change: the per-op files said 2 iterations
    where the settings said 5."""
    workdir, config = tiny_run
    fresh = copy_workflow(tmp_path / "fresh")
    subprocess.run(["cp", "-r", str(workdir / "results"), str(fresh / "results")], check=True)  # mtimes lost
    touched = snakemake(fresh, "--cores", "1", "report", "--configfile", str(config), "--touch")
    assert touched.returncode == 0, touched.stderr[-3000:]
    assert_nothing_to_do(snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", str(config)))
    before = _settings(fresh / "results")
    changed = crash_config(fresh / "changed.yaml", overrides={"_sgd_gpu_": {"profile_iterations": 3}})
    for _ in range(2):  # touched with the new settings: still not made with them
        done = snakemake(fresh, "--cores", "1", "report", "--configfile", str(changed), "--touch")
        assert done.returncode == 0, done.stderr[-3000:]
        assert _settings(fresh / "results") == before
        again = snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", str(changed))
        assert _rerun_labels(planned_jobs(again.stdout), {"profile"}) == {GOOD_LABELS[0]}


@pytest.mark.slow
@pytest.mark.e2e
def test_a_code_edit_reruns_what_imports_it_in_a_copy_of_the_results(tiny_run: tuple[Path, Path], tmp_path: Path) -> None:
    """Issue 34, case 2 and issue 33, item 2: an edit to src/dynemb/ re-ran every profile in the
    original clone and nothing in one that received the results; editing bandwidth/table.py re-ran
    nothing (the hand-kept list of peak_bandwidth's code had bandwidth/peak.py only)."""
    from embprof.workflow.code import STEP_COMMANDS, CodeGraph

    workdir, config = tiny_run
    fresh = checkout_with_results(workdir, tmp_path / "fresh")  # no .snakemake/: no Snakemake metadata
    table = fresh / "src" / "embprof" / "bandwidth" / "table.py"
    closures = {step: CodeGraph(table.parents[1]).closure(f"embprof.cli.{c}") for step, c in STEP_COMMANDS.items()}
    importers = {step for step, files in closures.items() if "bandwidth/table.py" in files}
    assert {"peak_bandwidth", "bandwidth"} <= importers and not importers & {"breakdown", "profile", "sunburst"}
    # Those steps, and the steps that read their outputs (the chart, the database, the report).
    for changed, rules, labels in [
        (fresh / "src" / "dynemb" / "tier.py", None, {CRASH_LABEL, *GOOD_LABELS}),
        (table, importers | {"bandwidth_plot", "database", "report"}, None),
    ]:
        jobs = planned_jobs(dry_run_with_edit(fresh, changed, config))
        if labels is not None:
            assert _rerun_labels(jobs, {"profile"}) == _rerun_labels(jobs, {"timing"}) == labels, jobs
            assert "collect" not in {rule for rule, _ in jobs}
        else:
            assert {rule for rule, _ in jobs} == rules, jobs
    assert_nothing_to_do(snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", str(config)))


@pytest.mark.slow
@pytest.mark.e2e
def test_measured_results_without_traces_or_figures_are_drawn_without_measuring(
    tiny_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """The GPU-host path: `measure` there, results/ copied without traces, `report` here."""
    workdir, config = tiny_run
    fresh = checkout_with_results(workdir, tmp_path / "fresh")
    for drawn in ("traces", "sunburst", "plots", "report"):
        shutil.rmtree(fresh / "results" / drawn)
    assert_nothing_to_do(snakemake(fresh, "-n", "--cores", "1", "measure", "--configfile", str(config)))
    report = snakemake(fresh, "-n", "--cores", "1", "report", "--configfile", str(config))
    assert report.returncode == 0, report.stderr[-3000:]
    assert {rule for rule, _ in planned_jobs(report.stdout)} == {"sunburst", "latency_plot", "bandwidth_plot", "report"}


_LOCAL_RULES = """
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(configfiles=[Path({config!r})]),
        snakefile=Path("Snakefile"), workdir=Path("."),
    )._workflow
    print(" ".join(sorted(workflow._localrules)))
"""


@pytest.mark.slow
@pytest.mark.e2e
def test_slurm_profile_gives_gpus_to_profile_and_timing_and_keeps_cheap_rules_local(
    tiny_run: tuple[Path, Path],
) -> None:
    """A dry run through profiles/slurm (no cluster needed): what each job would ask sbatch for."""
    workdir, config = tiny_run
    resources: dict[str, set[str]] = {}
    # Jobs after a re-run checkpoint only show once it has run: force the two layers apart.
    for forced in (["profile", "timing"], ["breakdown", "sunburst"]):
        done = snakemake(
            workdir, "-n", "--profile", "profiles/slurm", "report", "--configfile", str(config),
            "--forcerun", *forced, slurm=True,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        rule = None
        for line in done.stdout.splitlines():
            if m := _JOB.match(line):
                rule = m[1]
            elif rule and (m := re.match(r"^\s+resources: (.*)$", line)):
                resources.setdefault(rule, set()).add(m[1])
    assert {"profile", "timing", "breakdown", "sunburst", "report"} <= set(resources)
    for rule in ("profile", "timing"):
        for line in resources[rule]:
            assert "slurm_partition=gpu" in line and "gpu=1" in line.split(", "), line
    for rule in ("breakdown", "sunburst", "report"):
        assert all("gpu=1" not in line.split(", ") for line in resources[rule])
    # The executor runs these on the submitting host instead of submitting them.
    local = subprocess.run(
        [sys.executable, "-c", _LOCAL_RULES.format(config=str(config))],
        cwd=workdir, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert {"all", "collect", "status", "environment", "aggregate", "plotly_js", "latency_plot", "bandwidth_plot",
            "report"} <= set(local)
    assert not {"profile", "timing", "export", "breakdown", "sunburst"} & set(local)


def test_snakemake_lint_is_clean(tmp_path: Path) -> None:
    workdir = copy_workflow(tmp_path / "wf")
    done = snakemake(workdir, "--lint", "--configfile", str(TINY), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Congratulations, your workflow is in a good condition!" in done.stdout + done.stderr


def test_bad_config_fails_before_any_job_with_a_readable_error(tmp_path: Path) -> None:
    workdir = copy_workflow(tmp_path / "wf")
    bad = write_config(tmp_path / "bad.yaml", profiler="perf", num_iterations=0)
    done = snakemake(workdir, "-n", "report", "--configfile", str(bad), timeout=120)
    assert done.returncode != 0
    err = done.stdout + done.stderr
    assert "profiler: 'perf' is not one of ['auto', 'nsys', 'torch']" in err
    assert "num_iterations: 0 is less than the minimum of 1" in err
    assert not (workdir / "results").exists()
