"""The EmbeddingCollection family in the workflow: what a dry run plans, and `embprof ec-results`.

A full run of the family (four torchruns timed, four profiled) takes minutes
on a 2-core machine; it was run by hand (docs/embedding_collection.md). Here Snakemake's dry run,
the decision it acts on, is checked on a copy of the workflow.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import torch

from suite.embedding_collection.config import parse_config
from suite.embedding_collection.family import load_family
from suite.embedding_collection.records import append_record
from suite.embedding_collection.run import Rank, base_record

REPO = Path(__file__).resolve().parents[1]
PARTS = ("Snakefile", "rules", "report", "config", "envs", "profiles", "suite", "src")
MERGE = [sys.executable, "-m", "embprof", "ec-results"]


def copy_workflow(dst: Path) -> Path:
    dst.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dst / part, ignore=ignore)
        else:
            shutil.copy(src, dst / part)
    return dst


def test_dry_run_plans_a_timing_and_a_profile_per_run(tmp_path: Path) -> None:
    work = copy_workflow(tmp_path / "wf")
    runs = load_family(work / "config" / "embedding_collection.yaml").runs
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "embedding_collection"],
        cwd=work, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = Counter(
        line.split()[1].rstrip(":") for line in done.stdout.splitlines() if line.startswith("rule ")
    )
    assert jobs["ec_timing"] == jobs["ec_profile"] == jobs["ec_breakdown"] == len(runs)
    assert jobs["ec_results"] == 1


def test_merge_script_joins_run_records_and_refuses_bad_input(tmp_path: Path) -> None:
    where = Rank(rank=0, world_size=2, local_rank=0, local_world_size=2, device=torch.device("cpu"))
    paths = []
    for dedup in ("True", "False"):
        path = tmp_path / f"run_{dedup}.json"
        append_record(path, base_record(parse_config(["--use-index-dedup", dedup]), where))
        paths.append(path)
    out = tmp_path / "all" / "results.json"
    done = subprocess.run(
        [*MERGE, *map(str, paths), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [r["use_index_dedup"] for r in json.loads(out.read_text())] == [True, False]

    bad = tmp_path / "bad.json"
    bad.write_text('[{"label": "x"}]')
    done = subprocess.run(
        [*MERGE, str(bad), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (
        done.returncode == 1
        and "missing" in done.stderr
        and len(done.stderr.strip().splitlines()) == 1
    )
    assert [r["use_index_dedup"] for r in json.loads(out.read_text())] == [True, False], (
        "a failed merge leaves the old output"
    )
