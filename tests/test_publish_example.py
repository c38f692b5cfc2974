"""tools/publish_example.py on a real run: a tiny `measure` run packed as run_example.sh packs it,
published into an example folder; and the runs it must refuse, with the example left as it was."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from scripts import load_script

from tests.test_workflow_e2e import TINY, copy_workflow, snakemake

REPO = Path(__file__).resolve().parents[1]
publish_example = load_script("tools/publish_example.py")

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def pack(workdir: Path, archive: Path) -> Path:
    """results/ without traces and SQLite exports, as tools/gpu_host/run_example.sh packs it."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(workdir / "results", arcname="results",
                filter=lambda m: None if m.name.startswith(("results/traces", "results/sqlite")) else m)
    return archive


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run's `measure` target, from a copy of the checkout stamped with COMMIT (no .git there)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("gpu-host"))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("EMBPROF_GIT_COMMIT", COMMIT)
        env.setenv("EMBPROF_GIT_DIRTY", "0")
        done = snakemake(workdir, "--cores", "2", "measure", "--configfile", str(TINY))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (workdir / "results/report").exists()  # measure draws nothing
    return pack(workdir, tmp_path_factory.mktemp("out") / "results.tgz")


def example_folder(path: Path) -> Path:
    path.mkdir()
    (path / "config.yaml").write_text(TINY.read_text())
    (path / "README.md").write_text("# the example's own text\n")
    (path / "stale.json").write_text("{}\n")  # from an older run: must not survive
    return path


@pytest.mark.slow
@pytest.mark.e2e
def test_a_measured_run_becomes_the_example(measured: Path, tmp_path: Path) -> None:
    example = example_folder(tmp_path / "example")
    shot = tmp_path / "shot.png"
    commit = publish_example.publish(measured, example, cores=2, head=COMMIT, screenshot_to=shot, rewrite_docs=False)
    assert commit == COMMIT
    names = {p.name for p in example.iterdir()}
    assert names == {*publish_example.MEASURED, *publish_example.DRAWN, *publish_example.KEPT, "CHECKS.md"}
    assert (example / "README.md").read_text() == "# the example's own text\n"
    assert (example / "report/index.html").stat().st_size > 0
    assert len(list((example / "opcalls").glob("*.samples.csv"))) == 2  # and a per-op CSV beside each
    assert len(list((example / "opcalls").glob("*.csv"))) == 4
    assert "| " in (example / "CHECKS.md").read_text()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".publish-")]  # scratch removed


@pytest.mark.slow
@pytest.mark.e2e
def test_runs_of_another_commit_or_incomplete_are_refused(measured: Path, tmp_path: Path) -> None:
    example = example_folder(tmp_path / "example")
    before = {p.name: p.read_bytes() for p in example.iterdir()}
    shot = tmp_path / "shot.png"
    with pytest.raises(publish_example.PublishError, match=r"the run measured 0123456789ab, this checkout is at fedcba"):
        publish_example.publish(measured, example, 2, head="fedcba" * 7, screenshot_to=shot, rewrite_docs=False)
    partial = tmp_path / "partial.tgz"
    with tarfile.open(measured) as src, tarfile.open(partial, "w:gz") as dst:
        for member in src.getmembers():
            if "opcalls" not in member.name and "bandwidth" not in member.name:
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    with pytest.raises(publish_example.PublishError, match="the run is incomplete, results/ lacks peak_bandwidth.json, opcalls, bandwidth"):
        publish_example.publish(partial, example, 2, head=COMMIT, screenshot_to=shot, rewrite_docs=False)
    assert {p.name: p.read_bytes() for p in example.iterdir()} == before
    assert not shot.exists()


def test_the_command_says_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "results.tgz"
    junk.write_bytes(b"not a tarball")
    example = example_folder(tmp_path / "example")
    done = subprocess.run([sys.executable, str(REPO / "tools/publish_example.py"), str(junk), "--example", str(example)], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"publish_example: {junk}: cannot unpack")
