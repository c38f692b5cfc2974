"""The benchmark suite's building blocks, in process: ids, caps, ncu iterations, the results file."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
import torch

from embprof.errors import ContractError
from embprof.results.timings import RECORD_METRICS, timing_entry
from embprof.workflow.provenance import collect_provenance
from suite.configs import PRESETS, per_table_cap, suite_configs
from suite.datagen import generate_batches, powlaw_ids
from suite.ncu import parse_iterations
from suite.records import RESULT_FIELDS, append_record, read_records
from suite.runner import check_outputs

ROOT = Path(__file__).resolve().parents[1]

CPU = torch.device("cpu")


def _batches(**kw):
    args = dict(
        num_iterations=5, batch_size=64, caps=[1000, 300], distribution="pow-law", alpha=1.05,
        pooled=False, max_hotness=4, seed=7, device=CPU,
    )
    args.update(kw)
    return generate_batches(**args)


def test_per_table_cap_reproduces_design_example_and_keeps_capacity() -> None:
    assert per_table_cap(256 << 20, 10) == 25 << 20  # cap=25M in DESIGN.md's example label
    assert per_table_cap(16 << 20, 10) == 1638 << 10  # whole MiB would lose 37%
    assert per_table_cap(8 << 10, 2) == 4 << 10  # exact quotients are kept
    assert per_table_cap(1000, 3) == 333
    with pytest.raises(ValueError):
        per_table_cap(5, 10)


def test_num_tables_keeps_total_capacity_and_batch() -> None:
    preset = PRESETS["seed"]
    for cfg in suite_configs("TestNoHbm", preset, num_tables=4):
        assert cfg.num_tables == 4 and len(cfg.caps) == 4
        assert cfg.batch_size == preset.total_batch // 4
        assert sum(cfg.caps) == preset.total_cap  # 256M / 4 is exact


def test_total_cap_replaces_off_gpu_capacity_only() -> None:
    preset = PRESETS["seed"]
    (gpu,) = {cfg.caps for cfg in suite_configs("TestGpu", preset, total_cap=16 << 20)}
    (host,) = {cfg.caps for cfg in suite_configs("TestNoHbm", preset, total_cap=16 << 20)}
    (default,) = {cfg.caps for cfg in suite_configs("TestNoHbm", preset)}
    assert gpu == host == (1638 << 10,) * 10
    assert default == (25 << 20,) * 10
    with pytest.raises(ValueError, match="--total-cap must be at least 1 row"):
        suite_configs("TestNoHbm", preset, total_cap=0)


def test_powlaw_ids_stay_in_range_and_hot_ids_are_low() -> None:
    gen = torch.Generator().manual_seed(0)
    u = torch.rand(200_000, generator=gen, dtype=torch.float64)
    caps = torch.full((u.numel(),), 5000, dtype=torch.int64)
    ids = powlaw_ids(u, caps, 1.05)
    assert int(ids.min()) >= 0 and int(ids.max()) < 5000
    counts = torch.bincount(ids, minlength=5000)
    assert int(counts.argmax()) == 0
    # frequencies fall with the id: each decade of ids is drawn less often per id than the one before
    per_id = [counts[lo:hi].double().mean().item() for lo, hi in ((0, 10), (10, 100), (100, 1000), (1000, 5000))]
    assert per_id == sorted(per_id, reverse=True)


def test_batches_layout_statistics_and_seed() -> None:
    b = _batches()
    assert len(b) == 5
    for idx, off in zip(b.indices, b.offsets, strict=True):
        assert idx.dtype == torch.int64 and idx.numel() == 2 * 64
        assert torch.equal(off, torch.arange(2 * 64 + 1))
        assert int(idx[:64].max()) < 1000 and int(idx[64:].max()) < 300  # table-major
    stacked = torch.stack(b.indices)
    expected_distinct = [len(set(stacked[:, :64].flatten().tolist())), len(set(stacked[:, 64:].flatten().tolist()))]
    assert b.distinct_per_table == expected_distinct
    per_iter = [len(set(r[:64].tolist())) + len(set(r[64:].tolist())) for r in stacked]
    assert b.avg_n_unique == pytest.approx(sum(per_iter) / 5)
    assert b.avg_n_total == 128
    again = _batches()
    assert all(torch.equal(x, y) for x, y in zip(b.indices, again.indices, strict=True))
    other = _batches(seed=8)
    assert not all(torch.equal(x, y) for x, y in zip(b.indices, other.indices, strict=True))


@pytest.mark.parametrize("distribution", ["zipf", "uniform"])
def test_pooled_batches_have_bag_lengths_in_range(distribution: str) -> None:
    b = _batches(pooled=True, distribution=distribution)
    for idx, off in zip(b.indices, b.offsets, strict=True):
        lengths = off.diff()
        assert int(lengths.min()) >= 1 and int(lengths.max()) <= 4
        assert int(off[-1]) == idx.numel()
        assert int(idx[: int(off[64])].max()) < 1000 and int(idx[int(off[64]) :].max()) < 300


def test_ncu_iterations_parse() -> None:
    assert parse_iterations("0,3,7", 10) == [0, 3, 7]
    assert parse_iterations("2:20:3", 20) == [2, 5, 8, 11, 14, 17]
    assert parse_iterations(":3", 10) == [0, 1, 2]
    assert parse_iterations("8:", 10) == [8, 9]
    assert parse_iterations("::4", 10) == [0, 4, 8]
    for bad in ("a", "1:2:0", "1:2:3:4", "12", "5:5"):
        with pytest.raises(ValueError):
            parse_iterations(bad, 10)


def test_correctness_check_catches_a_difference_from_dyn_in_any_backend() -> None:
    x = torch.randn(8, 4)
    check_outputs({"dyn": x, "trc": x + 1e-6, "nv": x - 1e-6}, "same")
    with pytest.raises(AssertionError, match="dyn and nv forward outputs differ"):
        check_outputs({"dyn": x, "trc": x + 1e-6, "nv": x + 1e-2}, "shifted")


PROVENANCE = collect_provenance(ROOT, CPU, "torch")


def _record(label: str) -> dict:
    """A record the contract accepts: one repeat of dyn's train time, no other timing."""
    timings = {m: None for m in RECORD_METRICS} | {"dyn_train_ms": timing_entry([1.5])}
    return {f: None for f in RESULT_FIELDS} | {
        "label": label, "status": "ok", "dyn_train_ms": 1.5, "repeats": 1, "timer": "cpu_time",
        "timings": timings,
        "provenance": PROVENANCE,
    }


def _append_many(path: str, worker: int, count: int) -> None:
    for i in range(count):
        append_record(path, _record(f"w{worker}_{i}"))


def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "results.json"
    ctx = multiprocessing.get_context("fork")  # the children only do file I/O
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    labels = [r["label"] for r in read_records(path)]
    assert sorted(labels) == sorted(f"w{w}_{i}" for w in range(4) for i in range(25))
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_bad_results_file_and_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"not": "a list"}')
    path.write_text('"not a list"')
    with pytest.raises(ContractError, match="list of record objects"):
        append_record(path, _record("x"))
    path.write_text("[1, 2")
    with pytest.raises(ContractError, match="not valid JSON"):
        append_record(path, _record("x"))
    path.write_text("")
    append_record(path, _record("x"))
    assert json.loads(path.read_text())[0]["label"] == "x"
    with pytest.raises(ContractError, match="missing"):
        append_record(path, {"label": "y"})
    with pytest.raises(ContractError, match="must hold 1 repeats"):
        append_record(path, _record("z") | {"repeats": 1, "timings": {**_record("z")["timings"], "dyn_train_ms": timing_entry([1.5, 2.0])}})
    with pytest.raises(ContractError, match="null without a reason"):
        append_record(path, _record("z") | {"provenance": PROVENANCE | {"null_reasons": {}, "driver": None}})


def test_a_record_carries_the_host_traffic_fields_all_or_none(tmp_path: Path) -> None:
    from embprof.results.records import HOST_TRAFFIC_FIELDS

    path = tmp_path / "r.json"
    traffic = dict.fromkeys(HOST_TRAFFIC_FIELDS, 12.5)
    append_record(path, _record("a") | traffic)
    append_record(path, _record("b"))  # a config without host rows, or a record from before issue 32
    assert [HOST_TRAFFIC_FIELDS[0] in r for r in read_records(path)] == [True, False]
    with pytest.raises(ContractError, match="missing"):
        append_record(path, _record("c") | {HOST_TRAFFIC_FIELDS[0]: 1.0})
    with pytest.raises(ContractError, match="not a count per iteration"):
        append_record(path, _record("c") | traffic | {HOST_TRAFFIC_FIELDS[2]: "many"})


@pytest.mark.parametrize("suite", ["TestGpu", "TestCaching"])
def test_a_counted_pass_host_traffic_goes_into_the_record(monkeypatch: pytest.MonkeyPatch, suite: str) -> None:
    """Per train iteration, counted over an untimed pass after the timed ones (the timed steps count nothing); a
    config of GPU rows has none."""
    from dataclasses import replace

    from embprof.results.records import HOST_TRAFFIC_FIELDS
    from suite import runner
    from suite.configs import RunOptions

    monkeypatch.setattr(runner, "pick_device", lambda: CPU)
    cfg = replace(suite_configs(suite, PRESETS["smoke"])[0], num_iterations=2)
    work = runner.prepare(cfg, RunOptions(left_out={"trc": "--no-torchrec"}))
    runner.warm_up(work)
    dyn = work.backends[0].module
    repeats = [runner.time_phases(work) for _ in range(2)]
    assert set(dyn.host_stats().values()) == {0}
    record = runner.make_record(work, repeats, PROVENANCE, runner.host_traffic(work))
    stats = dyn.host_stats()
    if suite == "TestGpu":
        assert not set(HOST_TRAFFIC_FIELDS) & set(record)
        return
    assert list(record)[-4:] == list(HOST_TRAFFIC_FIELDS)
    iterations = len(work.batches)
    assert record["dyn_host_rows_in_per_iter"] == stats["rows_in"] / iterations
    assert record["dyn_host_bytes_out_per_iter"] == stats["bytes_out"] / iterations
    assert record["dyn_host_bytes_in_per_iter"] > 0 and record["dyn_host_rows_out_per_iter"] > 0


@pytest.mark.parametrize("suite", ["TestGpu", "TestCaching", "TestNoCaching", "TestNoHbm"])
def test_each_suite_builds_its_storage_mode(suite: str) -> None:
    from dynemb import EmbOptimType, StorageMode
    from dynemb.optimizers import state_width
    from suite.backends import build_dynamic_tables

    expected = {"TestGpu": StorageMode.GPU, "TestCaching": StorageMode.CACHING,
                "TestNoCaching": StorageMode.HYBRID, "TestNoHbm": StorageMode.HOST}[suite]
    for cfg in suite_configs(suite, PRESETS["smoke"]):
        opt = {"sgd": EmbOptimType.EXACT_SGD, "adam": EmbOptimType.ADAM}[cfg.optimizer]
        assert cfg.row_bytes == 4 * (cfg.dim + state_width(opt, cfg.dim))
        distinct = [cap // 3 for cap in cfg.caps]
        tables = build_dynamic_tables(cfg, cfg.hbm_bytes_per_table(distinct), CPU)
        assert [tables.storage_mode(t) for t in range(cfg.num_tables)] == [expected] * cfg.num_tables
        if suite == "TestCaching":
            assert cfg.hbm_rows_per_table(distinct) == [
                -(-n * int(cfg.cache_footprint_ratio * 10) // 10) for n in distinct
            ]


class _RecordingModule(torch.nn.Module):
    """Notes each forward's mode; a row per index, as pooling NONE returns."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(1000, 4))
        self.calls: list[tuple[bool, bool]] = []

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:  # noqa: ARG002 - TBE's signature
        self.calls.append((self.training, torch.is_grad_enabled()))
        return self.weight[indices % self.weight.shape[0]]


def test_warm_up_trains_then_evaluates_every_batch_and_leaves_training_on() -> None:
    from suite.runner import Backend, GradSource, Workload, warm_up

    batches = _batches()
    modules = {name: _RecordingModule() for name in ("dyn", "trc", "nv")}
    work = Workload(
        cfg=suite_configs("TestGpu", PRESETS["smoke"])[0], device=CPU, batches=batches,
        backends=[Backend(name, module) for name, module in modules.items()],
        skip_reasons={}, grads=GradSource(1), check=False,
    )
    warm_up(work)
    for module in modules.values():
        assert module.calls == [(True, True)] * len(batches) + [(False, False)] * len(batches)
        assert module.training
