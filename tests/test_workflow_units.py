"""The workflow's helpers (src/embprof/workflow) and the `embprof` subcommands its rules run."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from embprof.errors import ConfigError, ContractError, SuiteError
from embprof.results.configs import BenchConfig, read_configs, write_configs
from embprof.results.steps import StepRecord, merge_status
from embprof.workflow.benchcli import (
    collect_command,
    nsys_profile_command,
    timing_command,
    torch_profile_command,
)
from embprof.workflow.configs import code_digest, overrides_for, parse_collected, select_by_labels
from embprof.workflow.profiler import PIN_VARIABLE, cuda_gpu_present, find_nsys, resolve_profiler
from embprof.workflow.runner import StepContext, _publish_record, run_and_publish
from embprof.workflow.steps import log_tail, run_streaming
from embprof.workflow.suite import make_suite
from embprof.workflow.validation import validate_config

REPO = Path(__file__).resolve().parents[1]
GPU = "T2_totalB1024_D16_sgd_gpu_pool=none_cap=1K"
HBM = "T2_totalB1024_D16_sgd_no_hbm_pool=none_cap=4K"
SUITE = "suite/benchmark_batched_dynamicemb_tables.py"


def test_parse_collected_keeps_node_ids_and_labels() -> None:
    out = "\n".join([
        f"{SUITE}::TestGpu::test_x[{GPU}]",
        f"{SUITE}::TestNoHbm::test_x[{HBM}]",
        "",
        "2 tests collected in 1.2s",
    ])
    configs = parse_collected(out)
    assert configs == [BenchConfig(f"{SUITE}::TestGpu::test_x[{GPU}]", GPU),
                       BenchConfig(f"{SUITE}::TestNoHbm::test_x[{HBM}]", HBM)]
    assert read_table_roundtrip(configs) == configs


def read_table_roundtrip(configs: list[BenchConfig]) -> list[BenchConfig]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "configs.tsv"
        write_configs(path, configs)
        assert path.read_text().splitlines()[0] == "test_id\tlabel"
        return read_configs(path)


def test_parse_collected_rejects_bad_and_duplicate_labels() -> None:
    with pytest.raises(ValueError, match="not a config label"):
        parse_collected(f"{SUITE}::TestGpu::test_x[cpu-1]")
    with pytest.raises(ValueError, match="shared by"):
        parse_collected(f"{SUITE}::A::t[{GPU}]\n{SUITE}::B::t[{GPU}]")


def test_select_by_labels_is_any_substring_and_allows_equals() -> None:
    configs = [BenchConfig("a", GPU), BenchConfig("b", HBM)]
    assert select_by_labels(configs, []) == configs
    assert select_by_labels(configs, ["cap=4K"]) == [configs[1]]
    assert select_by_labels(configs, ["cap=1K", "_no_hbm_"]) == configs


def test_overrides_apply_in_order_later_wins() -> None:
    overrides = {"_sgd_": {"num_iterations": 5, "torchrec": False}, "_gpu_": {"num_iterations": 7},
                 "_adam_": {"num_iterations": 9}}
    assert overrides_for(GPU, overrides) == {"num_iterations": 7, "torchrec": False}
    assert overrides_for(HBM, overrides) == {"num_iterations": 5, "torchrec": False}
    assert overrides_for(HBM, None) == {}


def test_code_digest_follows_content_not_mtime(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    module = tmp_path / "pkg" / "a.py"
    module.write_text("x = 1\n")
    before = code_digest(["pkg", "missing.py"], root=tmp_path)
    os.utime(module, (1, 1))
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert code_digest(["pkg"], root=tmp_path) == before
    module.write_text("x = 2\n")
    assert code_digest(["pkg"], root=tmp_path) != before


def test_log_tail_collapses_progress_bars_and_keeps_the_last_lines() -> None:
    data = b"".join(f"line {i}\n".encode() for i in range(50))
    data += b"\r 10%|#  |\r 50%|### |\r100%|#####|\nFAILED: boom\n"
    tail = log_tail(data, lines=3).splitlines()
    assert tail == ["line 49", "100%|#####|", "FAILED: boom"]


def test_run_streaming_copies_output_and_returns_exit_status() -> None:
    sink = io.BytesIO()
    code = "import sys; print('hello'); print('oops', file=sys.stderr); sys.exit(3)"
    rc, tail = run_streaming([sys.executable, "-c", code], sink=sink)
    assert rc == 3
    assert b"hello" in sink.getvalue() and b"oops" in sink.getvalue()
    assert tail.splitlines() == ["hello", "oops"]


def _record(step: str, ok: bool, rc: int = 0) -> StepRecord:
    return StepRecord(step=step, label=GPU, test_id="t", ok=ok, returncode=rc,
                      log=f"results/logs/{step}/{GPU}.log", log_tail="" if ok else f"{step} died")


def test_merge_status_names_the_first_failed_step() -> None:
    ok = merge_status(GPU, "t", [_record("timing", True), _record("profile", True)])
    assert ok["ok"] and ok["failed_step"] is None and ok["log_tail"] == ""
    failed = merge_status(GPU, "t", [_record("timing", False, 1), _record("profile", False, -11)])
    assert failed["failed_step"] == "profile" and failed["returncode"] == -11
    assert failed["log_tail"] == "profile died" and failed["log"].endswith(f"profile/{GPU}.log")
    timing = merge_status(GPU, "t", [_record("profile", True), _record("timing", False, 2)])
    assert timing["failed_step"] == "timing" and timing["steps"]["profile"]["ok"]


def test_step_record_round_trips_and_rejects_other_json(tmp_path: Path) -> None:
    record = _record("profile", False, 4)
    record.write(tmp_path / "r.json")
    assert StepRecord.read(tmp_path / "r.json") == record
    (tmp_path / "bad.json").write_text('{"label": "x"}')
    with pytest.raises(ContractError, match="not a step record"):
        StepRecord.read(tmp_path / "bad.json")


@pytest.mark.parametrize(
    ("code", "make_file", "ok", "reason"),
    [
        ("import sys; sys.exit(5)", False, False, "exited with 5"),
        ("pass", False, False, "wrote no out.txt"),
        ("pass", True, True, ""),
    ],
)
def test_run_and_publish(tmp_path: Path, code: str, make_file: bool, ok: bool, reason: str) -> None:
    produced = tmp_path / "out.txt"
    if make_file:
        code = f"open({str(produced)!r}, 'w').write('data')"
    published, failed = [], []
    record = run_and_publish(
        StepContext("profile", GPU, "t", "log.txt", make_suite(REPO)), [sys.executable, "-c", code], produced,
        publish=published.append, write_failed=lambda: failed.append(True),
    )
    assert record.ok is ok and reason in record.reason
    assert bool(published) is ok and bool(failed) is not ok


def test_timing_record_is_checked_before_it_is_published(tmp_path: Path) -> None:
    produced, out = tmp_path / "raw.json", tmp_path / "out.json"
    for content, message in [("{", "not valid JSON"), (json.dumps([{"label": GPU}, {"label": HBM}]), "one record"),
                             (json.dumps([{"label": HBM}]), "is not"),
                             ('[{"label": "other"}]', f"{produced}: record 0: not a config label")]:
        produced.write_text(content)
        with pytest.raises(ContractError, match=message):
            _publish_record(produced, GPU, out)
        assert not out.exists()
    produced.write_text(json.dumps([{"label": GPU, "dyn_train_ms": 1.0}]))
    _publish_record(produced, GPU, out)
    assert json.loads(out.read_text()) == [{"label": GPU, "dyn_train_ms": 1.0}]


def test_config_errors_name_every_bad_key() -> None:
    config = {"preset": "huge", "overrides": {"_gpu_": {"num_iterations": 0, "iters": 2}}, "typo": 1}
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    lines = str(err.value).splitlines()
    assert lines[0] == "invalid config:"
    assert "  preset: 'huge' is not one of ['smoke', 'seed']" in lines
    assert "  overrides._gpu_.num_iterations: 0 is less than the minimum of 1" in lines
    assert any("'iters' was unexpected" in line for line in lines)
    assert any("'typo' was unexpected" in line for line in lines)
    filled: dict = {}
    validate_config(filled)
    assert filled["preset"] == "smoke" and filled["profiler"] == "auto" and filled["overrides"] == {}


def test_profiler_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PIN_VARIABLE, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    assert not cuda_gpu_present(gpus)
    (gpus / "0000:01:00.0").mkdir()
    assert cuda_gpu_present(gpus)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not cuda_gpu_present(gpus)

    assert resolve_profiler("auto", None) == "torch"
    assert resolve_profiler("nsys", None) == "nsys"
    assert resolve_profiler("torch", "/usr/bin/nsys") == "torch"
    monkeypatch.setenv(PIN_VARIABLE, "nsys")
    assert resolve_profiler("auto", None) == "nsys"
    assert resolve_profiler("torch", None) == "torch"

    nsys = tmp_path / "bin" / "nsys"
    nsys.parent.mkdir()
    nsys.write_text("#!/bin/sh\n")
    with pytest.raises(ConfigError, match="not an executable"):
        find_nsys(str(nsys))
    nsys.chmod(0o755)
    assert find_nsys(str(nsys.parent)) == str(nsys.resolve())


def test_benchmark_commands_follow_the_suite_contract() -> None:
    own = make_suite(REPO)
    timing = timing_command(own, "t::x[L]", "smoke", "out.json", num_iterations=3, torchrec=False,
                            extra_args=["--num-tables=1"])
    assert timing[:4] == [sys.executable, "-m", "pytest", "t::x[L]"]
    for option in (["--preset", "smoke"], ["-o", "timeout=0"], ["-p", "no:cacheprovider"],
                   ["--num-iterations", "3"], ["--results-file", "out.json"]):
        i = timing.index(option[0])
        assert timing[i:i + 2] == option
    assert "--no-torchrec" in timing and "--num-tables=1" in timing and "--repeats" not in timing
    repeated = timing_command(own, "t::x[L]", "smoke", "out.json", repeats=9)
    assert repeated[repeated.index("--repeats") + 1] == "9"
    nsys = nsys_profile_command("/opt/nsys", "results/traces/L", own, "t::x[L]", "seed")
    assert nsys[:2] == ["/opt/nsys", "profile"]
    assert "--capture-range=cudaProfilerApi" in nsys and "--trace=cuda,nvtx" in nsys
    assert nsys[nsys.index("-o") + 1] == "results/traces/L" and nsys[-2:] == ["--profile", "nsys"]


def test_another_suites_commands_take_its_launcher_args_and_no_options_of_ours(tmp_path: Path) -> None:
    """NVIDIA's suite: no --preset, --repeats or --results-file (its record goes to $BENCHMARK_RESULTS_FILE),
    its own arguments everywhere, the launcher for runs and not for collection, in its own folder."""
    file = tmp_path / "corelib" / "bench" / "suite.py"
    file.parent.mkdir(parents=True)
    file.write_text("def test_x(): pass\n")
    other = make_suite(REPO, file, ["--num-tables=4"], {"PYTHONPATH": "..:$PYTHONPATH"},
                       "-m torch.distributed.run --nproc_per_node 1")
    assert other.root == file.parent and other.target == "suite.py" and not other.own
    timing = timing_command(other, "suite.py::test_x[L]", "smoke", "out.json", num_iterations=3)
    assert timing[:5] == [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1"]
    assert timing[5:9] == ["-m", "pytest", "--rootdir=.", "suite.py::test_x[L]"]
    assert "--num-tables=4" in timing and "--num-iterations" in timing
    assert not {"--preset", "--results-file", "--repeats"} & set(timing)
    with pytest.raises(SuiteError, match="takes no --repeats"):
        timing_command(other, "suite.py::test_x[L]", "smoke", "out.json", repeats=3)
    with pytest.raises(SuiteError, match="torch profiler needs this project's suite"):
        torch_profile_command(other, "suite.py::test_x[L]", "smoke", "traces")
    collect = collect_command(other, "smoke", "TestGpu")
    assert collect[:5] == [sys.executable, "-m", "pytest", "--rootdir=.", "suite.py"] and "--preset" not in collect
    assert collect[-2:] == ["-k", "TestGpu"] and "--num-tables=4" in collect
    nsys = nsys_profile_command("/opt/nsys", "t/L", other, "suite.py::test_x[L]", "smoke")
    assert nsys[nsys.index("torch.distributed.run") + 3:][:4] == ["-m", "pytest", "--rootdir=.", "suite.py::test_x[L]"]
    assert other.environment()["PYTHONPATH"] == "..:" + os.environ.get("PYTHONPATH", "")
    assert other.options() == ["--suite", str(file), "--suite-arg=--num-tables=4",
                               "--suite-env=PYTHONPATH=..:$PYTHONPATH",
                               "--launcher", "-m torch.distributed.run --nproc_per_node 1"][:2] + [
        "--suite-arg=--num-tables=4", "--suite-env=PYTHONPATH=..:$PYTHONPATH",
        "--launcher", "-m torch.distributed.run --nproc_per_node 1"]


def _run_script(name: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`embprof NAME ARGS` as a rule runs it, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "embprof", name, *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_collect_lists_the_selected_configs_of_the_real_suite(tmp_path: Path) -> None:
    out = tmp_path / "configs.tsv"
    done = _run_script("collect", "--preset", "smoke", "--label=cap=1K", "--label=_no_hbm_",
                       "--select", "sgd", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert sorted(c.label for c in read_configs(out)) == [GPU, HBM]
    none = _run_script("collect", "--preset", "smoke", "--select", "no_such_config",
                       "--out", str(tmp_path / "none.tsv"))
    assert none.returncode == 1 and not (tmp_path / "none.tsv").exists()
    assert none.stderr.strip() == "embprof collect: error: no benchmark configs match select='no_such_config'"


def test_collect_passes_size_options_that_shape_labels(tmp_path: Path) -> None:
    out = tmp_path / "configs.tsv"
    done = _run_script("collect", "--preset", "smoke", "--label=_no_hbm_", "--select", "sgd",
                       "--extra-arg=--total-cap=4096", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert [c.label for c in read_configs(out)] == [HBM.replace("cap=4K", "cap=2K")]


def test_status_merges_every_config_and_drops_stale_ones(tmp_path: Path) -> None:
    from embprof.results.configs import BenchConfig, write_configs
    from embprof.results.paths import ResultsPaths
    from embprof.results.steps import read_statuses

    paths = ResultsPaths(tmp_path / "results")
    write_configs(paths.configs, [BenchConfig("t", GPU)])
    for step, ok in (("profile", True), ("timing", False)):
        _record(step, ok, 0 if ok else 3).write(paths.step(step, GPU))
    paths.status_dir.mkdir(parents=True)
    (paths.status(HBM)).write_text("{}")  # a config no longer selected
    done = _run_script("status", "--results-dir", str(paths.root))
    assert done.returncode == 0, done.stderr
    statuses = read_statuses(paths.status_dir)
    assert list(statuses) == [GPU]
    assert (statuses[GPU]["ok"], statuses[GPU]["failed_step"], statuses[GPU]["returncode"]) == (False, "timing", 3)


def test_status_refuses_records_of_another_config(tmp_path: Path) -> None:
    from embprof.results.configs import BenchConfig, write_configs
    from embprof.results.paths import ResultsPaths

    paths = ResultsPaths(tmp_path / "results")
    write_configs(paths.configs, [BenchConfig("t", HBM)])
    for step in ("profile", "timing"):
        _record(step, True).write(paths.step(step, HBM))  # records of GPU filed under HBM
    done = _run_script("status", "--results-dir", str(paths.root))
    assert done.returncode == 1 and "records of other configs" in done.stderr
    assert done.stderr.count("\n") == 1
    assert not paths.status(HBM).exists()


def test_export_fails_in_one_line_without_a_report_or_an_nsys(tmp_path: Path) -> None:
    missing = _run_script("export", str(tmp_path / "x.nsys-rep"), "--out", str(tmp_path / "x.sqlite"))
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"embprof export: error: {tmp_path / 'x.nsys-rep'}: missing or empty"
    report = tmp_path / "r.nsys-rep"
    report.write_bytes(b"\0" * 16)
    no_nsys = _run_script("export", str(report), "--nsys", str(tmp_path / "no-nsys"),
                          "--out", str(tmp_path / "x.sqlite"))
    assert no_nsys.returncode == 1 and "embprof export: error:" in no_nsys.stderr
    assert "needs nsys to export it" in no_nsys.stderr and no_nsys.stderr.count("\n") == 1
    assert not list(tmp_path.glob("*.sqlite"))
