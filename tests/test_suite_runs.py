"""The benchmark suite as the workflow drives it: real pytest processes, real TBE on the CPU."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import statistics
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

from embprof.labels import make_label, parse_label, sanitize_label
from embprof.results.records import HOST_TRAFFIC_FIELDS
from suite.records import RESULT_FIELDS

ROOT = Path(__file__).resolve().parents[1]
SUITE = "suite/benchmark_batched_dynamicemb_tables.py"
TEST = "test_dynamicemb_vs_torchrec"
DESIGN_EXAMPLE = "T10_totalB1048570_D128_adam_caching_pool=none_cap=25M_cfr=1.0"


def bench(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", SUITE, "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"pytest {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def assert_repeats_add_up(record: dict, backend: str) -> None:
    """Each repeat's train time is its forward plus its backward; flat fields are the medians."""
    timings = record["timings"]
    fwd, bwd, train = (timings[f"{backend}_{p}_ms"]["repeats"] for p in ("forward", "backward", "train"))
    assert len(train) == record["repeats"]
    assert train == pytest.approx([f + b for f, b in zip(fwd, bwd, strict=True)])
    for phase in ("forward", "backward", "train", "eval"):
        entry = timings[f"{backend}_{phase}_ms"]
        assert record[f"{backend}_{phase}_ms"] == entry["median"] == pytest.approx(statistics.median(entry["repeats"]))
        assert entry["min"] == min(entry["repeats"]) and entry["max"] == max(entry["repeats"])


def collected(*args: str) -> list[str]:
    out = bench("--collect-only", "-q", *args).stdout
    return [line for line in out.splitlines() if line.startswith(SUITE + "::")]


def test_collection_lists_the_seed_configs_with_their_labels() -> None:
    hbm_cap, cap = 1638 << 10, 25 << 20  # 16M/10 and 256M/10 rows, rounded (suite/configs.py)
    expected = []
    for suite, mode, caps, ratios in (
        ("TestGpu", "gpu", hbm_cap, [None]),
        ("TestCaching", "caching", cap, [0.8, 1.0]),
        ("TestNoCaching", "no_caching", cap, [None]),
        ("TestNoHbm", "no_hbm", cap, [None]),
    ):
        for opt in ("adam", "sgd"):
            for ratio in ratios:
                label = make_label(10, 104_857, 128, opt, mode, "none", [caps] * 10, ratio)
                expected.append(f"{SUITE}::{suite}::{TEST}[{label}]")
    ids = collected("--preset", "seed")
    assert ids == expected
    assert f"{SUITE}::TestCaching::{TEST}[{DESIGN_EXAMPLE}]" in ids
    for node in ids:
        fields = parse_label(node[node.index("[") + 1 : -1])
        assert fields.total_batch == 1_048_570 and fields.num_tables == 10


def test_label_option_selects_by_substrings_with_equals() -> None:
    ids = collected("--preset", "seed", "--label", "cfr=0.8", "--label", "sgd")
    assert ids == [f"{SUITE}::TestCaching::{TEST}[T10_totalB1048570_D128_sgd_caching_pool=none_cap=25M_cfr=0.8]"]
    assert len(collected("--preset", "smoke", "-k", "TestNoHbm")) == 2


def _smoke_labels() -> list[str]:
    return [node[node.index("[") + 1 : -1] for node in collected("--preset", "smoke")]


@pytest.mark.slow
def test_every_suite_runs_at_smoke_size_two_processes_append_to_one_file(tmp_path: Path) -> None:
    results = tmp_path / "timing" / "results.json"
    common = ["-q", "--preset", "smoke", "--num-iterations", "4"]  # smoke sizes; fewer batches keep CI short
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", SUITE, "-p", "no:cacheprovider", *common, *extra],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for extra, env in (
            (["-k", "TestGpu or TestCaching", "--results-file", str(results)], {}),
            (["-k", "TestNoCaching or TestNoHbm", "--backends", "dyn,nv"], {"BENCHMARK_RESULTS_FILE": str(results)}),
        )
    ]
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out[-4000:]
    records = json.loads(results.read_text())
    assert sorted(r["label"] for r in records) == sorted(_smoke_labels())
    for r in records:
        host = parse_label(r["label"]).mode != "gpu"  # dyn's host traffic, where its tables keep rows in host memory
        assert list(r) == list(RESULT_FIELDS) + list(HOST_TRAFFIC_FIELDS if host else ())
        assert not host or r["dyn_host_bytes_in_per_iter"] > 0
        assert r["status"] == "ok" and r["device"] == "cpu"
        assert r["avg_n_total"] == 1024 and 0 < r["avg_n_unique"] <= 1024
        assert r["num_iterations"] == 4 and tuple(r["num_embeddings_per_feature"]) == parse_label(r["label"]).caps
        for phase in ("forward", "backward", "eval"):
            assert r[f"dyn_{phase}_ms"] > 0
        assert r["repeats"] == 10 and r["timer"] == "cpu_time"  # the smoke preset's repeats
        assert_repeats_add_up(r, "dyn")
        # NVIDIA's dynamicemb needs CUDA: nulls and the reason, as for any backend that cannot run
        assert r["nv_skip_reason"] == "NVIDIA dynamicemb runs on CUDA only"
        assert all(r[f"nv_{p}_ms"] is None and r["timings"][f"nv_{p}_ms"] is None for p in ("forward", "backward", "train", "eval"))
        if parse_label(r["label"]).mode in ("no_caching", "no_hbm"):  # --backends dyn,nv
            assert r["trc_skip_reason"] == "not in --backends dyn,nv" and r["trc_train_ms"] is None
        elif r["optimizer_type"] == "sgd":
            assert r["trc_skip_reason"] is None
            assert_repeats_add_up(r, "trc")
            assert r["trc_eval_ms"] > 0
        else:
            assert "adam" in r["trc_skip_reason"]
            assert all(r[f"trc_{p}_ms"] is None for p in ("forward", "backward", "train", "eval"))
            assert all(r["timings"][f"trc_{p}_ms"] is None for p in ("forward", "backward", "train", "eval"))
        provenance = r["provenance"]
        assert provenance["kernel_path"] == "torch" and provenance["torch_threads"] == 1  # --cpu-threads 1
        assert provenance["cpu_count"] >= 1 and provenance["host_load_1m"] >= 0
    assert not [p.name for p in results.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_correctness_mode_passes_for_sgd_against_fbgemm(tmp_path: Path) -> None:
    proc = bench(
        "-q", "-rs", "--preset", "smoke", "--correctness", "--num-iterations", "2",
        "-k", "sgd or (TestGpu and adam)", "--results-file", str(tmp_path / "r.json"),
    )
    assert "5 passed, 1 skipped" in proc.stdout, proc.stdout[-2000:]
    assert ("correctness mode needs a backend beside dyn: trc: fbgemm_gpu TBE has no adam on the CPU; "
            "nv: NVIDIA dynamicemb runs on CUDA only") in proc.stdout


def _ncu_lines(*args: str) -> list[list[str]]:
    out = bench("-q", "--preset", "seed", "--profile", "ncu-gen", *args).stdout
    return [shlex.split(line) for line in out.splitlines() if line.startswith("ncu ")]


def test_ncu_gen_prints_one_command_that_selects_exactly_its_config() -> None:
    label = "T10_totalB1048570_D128_adam_caching_pool=none_cap=25M_cfr=1.0"
    (cmd,) = _ncu_lines("--label", "adam_caching", "--label", "cfr=1.0", "--ncu-iterations", "1:8:3",
                        "--ncu-kernel-regex", "segmented_unique|insert")
    split = cmd.index(sys.executable)
    ncu, inner = cmd[:split], cmd[split:]
    assert ncu[0] == "ncu" and "--nvtx" in ncu
    assert ncu[ncu.index("--profile-from-start") + 1] == "off"
    includes = [ncu[i + 1] for i, a in enumerate(ncu) if a == "--nvtx-include"]
    assert includes == ["ncu_iter/iter_1/", "ncu_iter/iter_4/", "ncu_iter/iter_7/"]
    assert ncu[ncu.index("--kernel-name") + 1] == "regex:segmented_unique|insert"
    assert ncu[ncu.index("-o") + 1] == f"ncu_{sanitize_label(label)}"
    assert inner[1:4] == ["-m", "pytest", SUITE]
    assert inner[inner.index("--profile") + 1] == "ncu"
    assert inner[inner.index("--preset") + 1] == "seed"
    assert inner[inner.index("--label") + 1] == label
    # The run ncu would wrap selects exactly this config, by its -k alone and by --label alone.
    k = inner[inner.index("-k") + 1]
    assert collected("--preset", "seed", "-k", k) == [f"{SUITE}::TestCaching::{TEST}[{label}]"]
    assert collected("--preset", "seed", "--label", label) == [f"{SUITE}::TestCaching::{TEST}[{label}]"]
    assert collected(*[a for a in inner[4:] if a != "-q"]) == [f"{SUITE}::TestCaching::{TEST}[{label}]"]

    plain = _ncu_lines("--label", "no_hbm", "--backends", "dyn,nv")
    assert len(plain) == 2
    for c in plain:
        assert "--kernel-name" not in c
        assert c[c.index("--backends") + 1] == "dyn,nv"  # the profiled run runs the same backends
        assert [c[i + 1] for i, a in enumerate(c) if a == "--nvtx-include"] == ["ncu_iter/iter_0/"]


def test_bad_options_fail_with_one_line() -> None:
    cases = [(["--profile", "torch"], "--trace-dir"), (["--num-iterations", "0"], "at least 1"),
             (["--correctness", "--backends", "dyn"], "--correctness compares dyn with another backend"),
             (["--backends", "trc,nv"], "leaves out dyn")]
    if not torch.cuda.is_available():
        cases += [(["--profile", "nsys"], "needs CUDA"), (["--profile", "ncu"], "needs CUDA")]
    for args, message in cases:
        proc = bench("-q", "--preset", "smoke", *args, check=False)
        assert proc.returncode == 4, (args, proc.stdout, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr
    bad_spec = bench("-q", "--preset", "seed", "--profile", "ncu-gen", "--label", "sgd_gpu", "--ncu-iterations", "200",
                     check=False)
    assert bad_spec.returncode == 4 and "outside 0..99" in bad_spec.stderr and "Traceback" not in bad_spec.stderr


def _contains(outer: dict, inner: dict) -> bool:
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


@pytest.mark.slow
def test_torch_profile_trace_follows_the_range_layout(tmp_path: Path) -> None:
    label = "T2_totalB1024_D16_sgd_caching_pool=none_cap=4K_cfr=0.8"
    bench("-q", "--preset", "smoke", "--profile", "torch", "--trace-dir", str(tmp_path), "--num-iterations", "2",
          "--label", label)
    (trace,) = tmp_path.iterdir()
    assert trace.name == f"{sanitize_label(label)}.kineto.json.gz"
    events = json.loads(gzip.open(trace).read())["traceEvents"]
    ranges = [e for e in events if e.get("cat") == "user_annotation"]
    assert len({e["tid"] for e in ranges}) == 1
    tid = ranges[0]["tid"]

    def inside(outer: dict, name: str) -> list[dict]:
        return [e for e in ranges if e["name"] == name and e is not outer and _contains(outer, e)]

    (top,) = [e for e in ranges if e["name"] == label]
    iters = [e for e in ranges if e["name"].startswith("nsys_iter_")]
    assert sorted(e["name"] for e in iters) == ["nsys_iter_0", "nsys_iter_1"]
    assert all(_contains(top, it) for it in iters)
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op" and e["tid"] == tid]
    for it in iters:
        (dyn,), (trc,) = inside(it, "dyn"), inside(it, "trc")
        assert dyn["ts"] < trc["ts"]
        for backend in (dyn, trc):
            (_fwd,), (bwd,) = inside(backend, "forward"), inside(backend, "backward")
            # backward work runs on the thread holding the ranges (autograd multithreading off)
            assert any(_contains(bwd, op) for op in cpu_ops)
        dyn_fwd, dyn_bwd = inside(dyn, "forward")[0], inside(dyn, "backward")[0]
        assert inside(dyn_fwd, "dynamicemb_prefetch") and inside(dyn_fwd, "DynamicEmbeddingFunction.forward")
        assert inside(dyn_bwd, "DynamicEmbeddingFunction.backward")
        assert any(e["name"].startswith("op:") and _contains(dyn_fwd, e) for e in ranges)
        assert not any(e["name"].startswith("op:") and _contains(trc, e) for e in ranges)


@pytest.mark.slow
def test_records_carry_the_gpu_driver_from_nvidia_smi_where_it_is_on_path(tmp_path: Path) -> None:
    """The same run with a stand-in nvidia-smi (answering from a real H200's capture) and without
    any: the driver is read where the command exists, and every null says why."""
    from fake_nvidia_smi import install

    args = ["-q", "--preset", "smoke", "--label", "_sgd_gpu_", "--num-iterations", "2", "--repeats", "5"]
    with_smi = install(tmp_path / "bin")
    bench(*args, "--results-file", str(tmp_path / "with.json"), env={"PATH": with_smi["PATH"]})
    bare_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not Path(p, "nvidia-smi").exists())
    bench(*args, "--results-file", str(tmp_path / "without.json"), env={"PATH": bare_path})
    [found] = json.loads((tmp_path / "with.json").read_text())
    [missing] = json.loads((tmp_path / "without.json").read_text())
    assert found["repeats"] == 5 and len(found["timings"]["dyn_train_ms"]["repeats"]) == 5
    assert found["provenance"]["driver"] == "590.48.01"
    assert found["provenance"]["gpu_clocks"] is None  # the benchmark ran on the CPU
    assert found["provenance"]["null_reasons"]["gpu_clocks"] == "the benchmark ran on the CPU"
    assert missing["provenance"]["driver"] is None
    assert missing["provenance"]["null_reasons"]["driver"] == "nvidia-smi is not on PATH"
    for record in (found, missing):
        provenance = record["provenance"]
        assert provenance["cuda"] is None and "CPU build" in provenance["null_reasons"]["cuda"]
        assert provenance["triton"] == version("triton")
        assert provenance["git_commit"] == git("rev-parse", "HEAD")
        assert provenance["git_dirty"] == bool(git("status", "--porcelain", "--untracked-files=no"))


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
