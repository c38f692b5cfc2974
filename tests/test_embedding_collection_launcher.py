"""The EmbeddingCollection benchmark end to end: the launcher on 2 CPU processes (gloo), tiny sizes.

Also the entry point's refusals and the probed reasons TorchRec's baseline is
skipped on this CPU, in process.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

from suite.embedding_collection.backends import torchrec_skip_reason
from suite.embedding_collection.compare import main as compare_main
from suite.embedding_collection.config import check_world, parse_config
from suite.embedding_collection.records import EC_RESULT_FIELDS
from suite.embedding_collection.run import main
from suite.errors import ECConfigError

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "suite" / "benchmark_embedding_collection.sh"
TINY = [
    "--num-embeddings-per-feature", "300,20,1000",
    "--multi-hot-sizes", "4,1,2",
    "--embedding-dim", "8",
    "--iterations", "3",
    "--warmup", "1",
    "--timeout-s", "120",
]  # fmt: skip


def launch(*args: str, wrapper: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "NPROC", "RANK_WRAPPER")
    }
    if wrapper is not None:
        env["RANK_WRAPPER"] = wrapper
    env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU path, even on a machine with a GPU
    return subprocess.run(
        [str(LAUNCHER), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def records(path: Path) -> list[dict]:
    return json.loads(path.read_text())


@pytest.mark.slow
def test_launcher_writes_records_for_dedup_on_and_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "ec.json"
    for dedup in ("True", "False"):
        done = launch(dedup, "True", "16", *TINY, "--results-file", str(results))
        assert done.returncode == 0, done.stderr[-3000:]
    on, off = records(results)
    for rec, dedup in ((on, True), (off, False)):
        assert set(rec) == set(EC_RESULT_FIELDS)
        assert rec["status"] == "ok" and rec["use_index_dedup"] is dedup
        assert (rec["world_size"], rec["backend"], rec["device"]) == (2, "gloo", "cpu")
        assert rec["table_backend"] == "dyn" and rec["num_tables"] == 1 and rec["num_features"] == 3
        assert rec["batch_size"] == 16 and rec["local_batch_size"] == 8
        assert rec["forward_ms"] > 0 and rec["backward_ms"] > 0
        assert rec["total_ms"] == max(rec["total_ms_per_rank"])
        assert len(rec["forward_ms_per_rank"]) == 2
    ids_per_rank = 8 * (4 + 1 + 2)
    assert off["ids_sent_per_rank_per_iter"] == [ids_per_rank, ids_per_rank]
    assert all(
        d <= o
        for d, o in zip(
            on["ids_sent_per_rank_per_iter"], off["ids_sent_per_rank_per_iter"], strict=True
        )
    )
    assert sum(on["ids_sent_per_rank_per_iter"]) < sum(off["ids_sent_per_rank_per_iter"])
    assert on["label"].startswith("T3_totalB48_D8_adam_ec_dyn_dedup=on")

    assert compare_main([str(results)]) == 0
    rows = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith(("| on ", "| off "))
    ]
    assert [r.split(" | ")[6:8] for r in rows] == [
        ["not run", f"{on['total_ms']:.2f}"],
        ["not run", f"{off['total_ms']:.2f}"],
    ]


@pytest.mark.slow
def test_launcher_runs_torchrec_baseline_and_profiles_each_rank(tmp_path: Path) -> None:
    results = tmp_path / "ec.json"
    # each rank under a wrapper command, as one nsys per rank would run (env -u: a real command)
    done = launch(
        "False",
        "False",
        "16",
        *TINY,
        "--optimizer",
        "exact_sgd",
        "--results-file",
        str(results),
        wrapper="env -u NO_SUCH_VARIABLE",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (trc,) = records(results)
    assert trc["status"] == "ok" and trc["table_backend"] == "trc" and trc["num_tables"] == 3
    assert trc["total_ms"] > 0 and trc["ids_sent_per_rank_per_iter"] is None

    traces = tmp_path / "traces"
    done = launch(
        "True",
        "True",
        "16",
        *TINY,
        "--profile",
        "torch",
        "--trace-dir",
        str(traces),
        "--results-file",
        str(results),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(records(results)) == 1, "a profile run appends no record"
    label = "T3_totalB48_D8_adam_ec_dyn_dedup=on_hot=mixed_ws=2"
    for rank in (0, 1):
        with gzip.open(traces / f"{label}.rank{rank}.kineto.json.gz", "rt") as fh:
            names = {e.get("name") for e in json.load(fh)["traceEvents"]}
        assert {label, "nsys_iter_0", "nsys_iter_2", "dyn", "forward", "backward"} <= names
        assert {
            "op:all_to_all_ids",
            "op:all_to_all_embeddings",
            "op:all_to_all_grads",
            "op:segmented_unique",
        } <= names


def test_torchrec_skip_reasons_are_probed_on_the_cpu() -> None:
    import torch

    cpu = torch.device("cpu")
    dedup = torchrec_skip_reason(parse_config(["--optimizer", "exact_sgd"]), cpu)
    assert dedup is not None and "jagged_unique_indices" in dedup
    adam = torchrec_skip_reason(parse_config(["--use-index-dedup", "False"]), cpu)
    assert adam is not None and "adam" in adam
    assert (
        torchrec_skip_reason(
            parse_config(["--use-index-dedup", "False", "--optimizer", "exact_sgd"]), cpu
        )
        is None
    )


def test_entry_point_refuses_bad_runs_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ECConfigError, match="not divisible"):
        check_world(parse_config(["--batch-size", "15"]), 2)
    with pytest.raises(ECConfigError, match="--multi-hot-sizes has 2 values for 3 features"):
        parse_config(["--num-embeddings-per-feature", "1,2,3", "--multi-hot-sizes", "1,2"])
    with pytest.raises(ECConfigError, match="needs --trace-dir"):
        parse_config(["--profile", "torch"])
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: run under torchrun") and "\n" not in err
