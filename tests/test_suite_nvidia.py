"""The nv backend (NVIDIA's dynamicemb) on the CPU: the plan from a config, the one-line skips, the
module built from the plan (a stand-in package records what is passed), the rows correctness mode
loads, the backend choice, the record's nv fields. With ``DYNAMICEMB_SRC`` (NVIDIA's
``corelib/dynamicemb``) the names the suite passes are checked against its source."""

from __future__ import annotations

import ast
import math
import os
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from embprof.errors import ContractError
from embprof.results.timings import RECORD_METRICS, TIMING_METRICS, check_timings, repeat_values
from suite import nvidia
from suite.backends import DYN_INIT_BOUND, reference_rows
from suite.configs import (
    HYBRID_HBM_SHARE,
    PRESETS,
    SUITES,
    left_out_backends,
    parse_backends,
    suite_configs,
)

ROOT = Path(__file__).resolve().parents[1]

CPU = torch.device("cpu")
CUDA = torch.device("cuda", 0)  # only named: the stand-in package never touches it
SEED_16M = {"total_cap": 16 << 20}  # the GPU host's runs (issue 31)


def _configs():
    for preset, extra in (("smoke", {}), ("seed", SEED_16M)):
        for suite in SUITES:
            yield from suite_configs(suite, PRESETS[preset], **extra)


@pytest.mark.parametrize("cfg", list(_configs()), ids=lambda c: c.label)
def test_plan_gives_each_suite_its_layout_and_dyns_gpu_memory(cfg) -> None:
    distinct = [cap // 3 for cap in cfg.caps]
    hbm_rows = cfg.hbm_rows_per_table(distinct)
    plan = nvidia.nvidia_plan(cfg, hbm_rows)
    assert plan.layout == nvidia.LAYOUTS[cfg.mode]
    assert [t.max_capacity for t in plan.tables] == list(cfg.caps)
    assert {(t.dim, t.caching) for t in plan.tables} == {(cfg.dim, cfg.mode == "caching")}
    budgets = [t.local_hbm_for_values for t in plan.tables]
    assert budgets == [rows * cfg.row_bytes for rows in hbm_rows]  # distinct // 3 never fills a table
    if cfg.mode == "gpu":
        assert plan.gpu_rows == cfg.caps
    elif cfg.mode == "no_hbm":
        assert budgets == [0] * cfg.num_tables and plan.gpu_rows == (0,) * cfg.num_tables
    else:
        if cfg.mode == "no_caching":
            assert hbm_rows == [math.ceil(cap * HYBRID_HBM_SHARE) for cap in cfg.caps]
        # NVIDIA shares the summed budget by capacity: the same GPU rows in all, to a row a table
        assert abs(sum(plan.gpu_rows) - sum(hbm_rows)) <= cfg.num_tables
    assert plan.optimizer == {"sgd": "EXACT_SGD", "adam": "ADAM"}[cfg.optimizer]
    assert plan.pooling == cfg.pooling.upper() == "NONE"
    assert plan.optimizer_args == {"learning_rate": cfg.learning_rate, "eps": cfg.eps, "beta1": cfg.beta1,
                                   "beta2": cfg.beta2, "weight_decay": cfg.weight_decay}
    assert plan.init_bound == DYN_INIT_BOUND and plan.score_strategy == "TIMESTAMP"
    assert plan.table_names == [f"t{i}" for i in range(cfg.num_tables)]


def test_a_cache_of_every_row_stays_a_cache() -> None:
    cfg = next(c for c in suite_configs("TestCaching", PRESETS["smoke"]) if c.cache_footprint_ratio == 1.0)
    total = sum(cfg.caps) * cfg.row_bytes
    assert nvidia.storage_layout(total, total, caching=True) == "HBM_ONLY"  # NVIDIA's rule at a full budget
    plan = nvidia.nvidia_plan(cfg, cfg.hbm_rows_per_table(list(cfg.caps)))  # every id touched
    assert plan.layout == "CACHING"
    assert [t.local_hbm_for_values for t in plan.tables] == [(cap - 1) * cfg.row_bytes for cap in cfg.caps]


@pytest.mark.parametrize(
    ("total", "hbm", "caching", "layout"),
    [(100, 100, False, "HBM_ONLY"), (100, 200, True, "HBM_ONLY"), (100, 99, True, "CACHING"),
     (100, 0, False, "HOST_ONLY"), (100, 10, False, "HYBRID")],
)
def test_storage_layout_follows_nvidias_rule(total, hbm, caching, layout) -> None:
    assert nvidia.storage_layout(total, hbm, caching) == layout


def test_a_plan_off_its_suites_layout_is_refused() -> None:
    cfg = suite_configs("TestNoCaching", PRESETS["smoke"])[0]
    with pytest.raises(ValueError, match="would store it as HBM_ONLY, not HYBRID"):
        nvidia.nvidia_plan(cfg, list(cfg.caps))


def test_on_the_cpu_or_off_its_layout_nv_is_skipped_with_one_line() -> None:
    cfg = suite_configs("TestGpu", PRESETS["smoke"])[0]
    built = nvidia.build_nvidia_tables(cfg, list(cfg.caps), CPU)
    assert built.module is None and built.skip_reason == "NVIDIA dynamicemb runs on CUDA only"
    hybrid = suite_configs("TestNoCaching", PRESETS["smoke"])[0]
    built = nvidia.build_nvidia_tables(hybrid, list(hybrid.caps), CUDA)  # before any import
    assert built.module is None and built.skip_reason.endswith("would store it as HBM_ONLY, not HYBRID")


def test_a_package_that_does_not_import_is_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "dynamicemb", None)  # as if absent
    module, reason = nvidia.import_dynamicemb()
    assert module is None and reason.startswith("NVIDIA dynamicemb is not importable: ModuleNotFoundError")
    monkeypatch.delitem(sys.modules, "dynamicemb")
    package = tmp_path / "dynamicemb"
    package.mkdir()
    (package / "__init__.py").write_text('raise OSError("libcudart.so.13: cannot open shared object file\\nmore")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    module, reason = nvidia.import_dynamicemb()
    assert module is None
    assert reason == "NVIDIA dynamicemb is not importable: OSError: libcudart.so.13: cannot open shared object file"
    cfg = suite_configs("TestGpu", PRESETS["smoke"])[0]
    assert nvidia.build_nvidia_tables(cfg, list(cfg.caps), CUDA).skip_reason == reason


# ---- a stand-in for NVIDIA's package: records every name the build passes ----------------------


class _Members(type):
    """An enum stand-in: any member, recorded as ``Class.MEMBER``."""

    used: set[str] = set()

    def __getattr__(cls, name: str) -> str:
        if name.startswith("__"):
            raise AttributeError(name)
        _Members.used.add(f"{cls.__name__}.{name}")
        return f"{cls.__name__}.{name}"


def _stand_in(layout: str | None) -> tuple[types.ModuleType, types.ModuleType, dict]:
    calls: dict = {"options": [], "initializers": []}

    def options(**kwargs):
        calls["options"].append(kwargs)
        return kwargs

    def initializer(**kwargs):
        calls["initializers"].append(kwargs)
        return kwargs

    class BatchedDynamicEmbeddingTablesV2(torch.nn.Module):
        def __init__(self, **kwargs) -> None:
            super().__init__()
            calls["module"] = kwargs
            if layout is not None:
                self._storage_layout = types.SimpleNamespace(name=layout)

    package = types.ModuleType("dynamicemb")
    package.__path__ = []  # a package, so the submodule import finds sys.modules' entry
    submodule = types.ModuleType("dynamicemb.batched_dynamicemb_tables")
    submodule.BatchedDynamicEmbeddingTablesV2 = BatchedDynamicEmbeddingTablesV2
    package.batched_dynamicemb_tables = submodule
    package.DynamicEmbTableOptions = options
    package.DynamicEmbInitializerArgs = initializer
    for name in ("DynamicEmbInitializerMode", "DynamicEmbScoreStrategy", "DynamicEmbPoolingMode", "EmbOptimType"):
        setattr(package, name, _Members(name, (), {}))
    return package, submodule, calls


@pytest.fixture
def stand_in(monkeypatch):
    pytest.importorskip("fbgemm_gpu")  # the build takes BoundsCheckMode from fbgemm_gpu, as TBE's does

    def install(layout: str | None = None) -> dict:
        package, submodule, calls = _stand_in(layout)
        monkeypatch.setitem(sys.modules, "dynamicemb", package)
        monkeypatch.setitem(sys.modules, "dynamicemb.batched_dynamicemb_tables", submodule)
        return calls

    return install


@pytest.mark.parametrize("suite", list(SUITES))
def test_the_module_is_built_from_the_plan(suite, stand_in) -> None:
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode

    cfg = replace(suite_configs(suite, PRESETS["seed"], **SEED_16M)[0], optimizer="adam")
    hbm_rows = cfg.hbm_rows_per_table([cap // 3 for cap in cfg.caps])
    plan = nvidia.nvidia_plan(cfg, hbm_rows)
    calls = stand_in(plan.layout)
    built = nvidia.build_nvidia_tables(cfg, hbm_rows, CUDA)
    assert built.skip_reason is None and built.module is not None
    assert [
        (o["dim"], o["max_capacity"], o["local_hbm_for_values"], o["caching"], o["bucket_capacity"]) for o in calls["options"]
    ] == [(t.dim, t.max_capacity, t.local_hbm_for_values, t.caching, 128) for t in plan.tables]
    for o in calls["options"]:
        assert o["index_type"] is torch.int64 and o["embedding_dtype"] is torch.float32
        assert o["score_strategy"] == "DynamicEmbScoreStrategy.TIMESTAMP"
        assert o["initializer_args"] == {"mode": "DynamicEmbInitializerMode.UNIFORM", "lower": -0.01, "upper": 0.01}
        assert o["eval_initializer_args"] == {"mode": "DynamicEmbInitializerMode.CONSTANT", "value": 0.0}
    module = calls["module"]
    assert module["table_names"] == plan.table_names and module["device"] == CUDA
    assert module["optimizer"] == "EmbOptimType.ADAM" and module["pooling_mode"] == "DynamicEmbPoolingMode.NONE"
    assert (module["learning_rate"], module["eps"], module["beta1"], module["beta2"], module["weight_decay"]) == (
        0.01, 1e-8, 0.9, 0.999, 0.0)
    assert module["stochastic_rounding"] is False and module["bounds_check_mode"] == BoundsCheckMode.NONE
    assert module["output_dtype"] is torch.float32


def test_a_module_built_in_another_layout_is_an_error(stand_in) -> None:
    cfg = suite_configs("TestNoCaching", PRESETS["smoke"])[0]
    stand_in("HBM_ONLY")
    with pytest.raises(RuntimeError, match="built HBM_ONLY, the plan says HYBRID"):
        nvidia.build_nvidia_tables(cfg, cfg.hbm_rows_per_table([1] * cfg.num_tables), CUDA)


def _source_names(root: Path) -> dict[str, set[str]]:
    """Class -> its fields, members, methods and __init__ parameters, from NVIDIA's source."""
    names: dict[str, set[str]] = {}
    package = root / "dynamicemb" if (root / "dynamicemb").is_dir() else root
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found = names.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        found.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        found.update(t.id for t in item.targets if isinstance(t, ast.Name))
                    elif isinstance(item, ast.FunctionDef):
                        found.add(item.name)
                        if item.name == "__init__":
                            found.update(a.arg for a in item.args.args + item.args.kwonlyargs)
    init = ast.parse((package / "__init__.py").read_text())
    names["__init__"] = {a.asname or a.name for n in ast.walk(init) if isinstance(n, ast.ImportFrom) for a in n.names}
    return names


@pytest.mark.skipif(not os.environ.get("DYNAMICEMB_SRC"), reason="DYNAMICEMB_SRC (NVIDIA's corelib/dynamicemb) not set")
def test_every_name_the_build_passes_is_in_nvidias_source(stand_in) -> None:
    from fbgemm_gpu.split_embedding_configs import EmbOptimType

    names = _source_names(Path(os.environ["DYNAMICEMB_SRC"]))
    _Members.used.clear()
    calls = stand_in()
    for cfg in _configs():
        nvidia.build_nvidia_tables(cfg, cfg.hbm_rows_per_table([cap // 3 for cap in cfg.caps]), CUDA)
    exported = {"DynamicEmbTableOptions", "DynamicEmbInitializerArgs", "DynamicEmbInitializerMode",
                "DynamicEmbScoreStrategy", "DynamicEmbPoolingMode", "EmbOptimType"}
    assert exported <= names["__init__"]
    assert set(calls["options"][0]) <= names["DynamicEmbTableOptions"]
    assert {k for i in calls["initializers"] for k in i} <= names["DynamicEmbInitializerArgs"]
    assert set(calls["module"]) <= names["BatchedDynamicEmbeddingTablesV2"]
    assert {"tables", "forward"} <= names["BatchedDynamicEmbeddingTablesV2"]
    assert {"insert", "value_dim", "embedding_dim"} <= names["Storage"]  # what correctness mode calls
    for used in _Members.used:
        enum, member = used.split(".")
        if enum == "EmbOptimType":  # fbgemm_gpu's, which dynamicemb re-exports
            assert hasattr(EmbOptimType, member), used
        else:
            assert member in names[enum], used


def test_correctness_rows_load_in_chunks_with_zero_state(monkeypatch) -> None:
    class Storage:
        def __init__(self) -> None:
            self.inserts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

        def value_dim(self, table: int) -> int:
            return 12

        def embedding_dim(self, table: int) -> int:
            return 4

        def insert(self, keys, table_ids, values) -> None:
            self.inserts.append((keys, table_ids, values))

    module = types.SimpleNamespace(tables=Storage())
    monkeypatch.setattr(nvidia, "INSERT_ROWS", 4)
    rows = torch.randn(10, 4, dtype=torch.float64)
    nvidia.load_nvidia_rows(module, 3, rows)
    keys, table_ids, values = (torch.cat(parts) for parts in zip(*module.tables.inserts, strict=True))
    assert [len(k) for k, _, _ in module.tables.inserts] == [4, 4, 2]
    assert torch.equal(keys, torch.arange(10)) and torch.equal(table_ids, torch.full((10,), 3))
    assert values.dtype == torch.float32 and values.shape == (10, 12)
    assert torch.equal(values[:, :4], rows.float()) and not values[:, 4:].any()


def test_correctness_rows_without_tbe_are_seeded_uniform() -> None:
    cfg = suite_configs("TestGpu", PRESETS["smoke"])[0]
    first = list(reference_rows(cfg, 5, CPU, None))
    again = list(reference_rows(cfg, 5, CPU, None))
    assert [r.shape for r in first] == [(cap // 2, cfg.dim) for cap in cfg.caps]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert all(float(r.abs().max()) <= DYN_INIT_BOUND for r in first)
    assert not torch.equal(first[0], next(reference_rows(cfg, 6, CPU, None)))


# ---- choosing backends; the record's nv fields --------------------------------------------------


def test_backends_option_picks_and_orders_and_says_why_one_is_left_out() -> None:
    assert parse_backends("nv,dyn") == ("dyn", "nv")
    assert left_out_backends(None, False) == {}
    assert left_out_backends("dyn,nv", False) == {"trc": "not in --backends dyn,nv"}
    assert left_out_backends(None, True) == {"trc": "--no-torchrec"}
    assert left_out_backends("dyn", True) == {"trc": "--no-torchrec", "nv": "not in --backends dyn"}
    for spec, message in (("dyn,xla", "unknown backend 'xla'"), ("trc,nv", "leaves out dyn"),
                          ("dyn,dyn", "names a backend twice"), ("", "leaves out dyn")):
        with pytest.raises(ValueError, match=message):
            parse_backends(spec)
    with pytest.raises(ValueError, match="--no-torchrec leaves out trc, which --backends dyn,trc asks for"):
        left_out_backends("dyn,trc", True)


def test_a_records_nv_metrics_are_required_new_and_absent_in_older_records() -> None:
    from embprof.results.timings import timing_entry

    assert RECORD_METRICS == (*TIMING_METRICS, "nv_forward_ms", "nv_backward_ms", "nv_train_ms", "nv_eval_ms")
    record = {"repeats": 1, "timer": "cpu_time", "dyn_train_ms": 1.5,
              "timings": {m: None for m in TIMING_METRICS} | {"dyn_train_ms": timing_entry([1.5])}}
    assert repeat_values(record, "nv_train_ms") == [] and repeat_values(record, "dyn_train_ms") == [1.5]
    with pytest.raises(ContractError, match="must map exactly"):
        check_timings(record)  # a new record names nv's metrics, null where nv did not run
    check_timings(record | {"timings": record["timings"] | {m: None for m in RECORD_METRICS[8:]}})


def test_summary_line_sets_each_backend_beside_dyn() -> None:
    from suite.benchmark_batched_dynamicemb_tables import summary_line

    record = {"label": "L", "repeats": 3, "trc_skip_reason": "--no-torchrec", "nv_skip_reason": None}
    for phase, dyn in (("forward", 1.0), ("backward", 2.0), ("train", 3.0), ("eval", 0.5)):
        record |= {f"dyn_{phase}_ms": dyn, f"trc_{phase}_ms": None, f"nv_{phase}_ms": 2 * dyn}
    line = summary_line(record)
    assert "train dyn 3.000 / nv 6.000 ms (nv/dyn 2x)" in line
    assert line.endswith("trc skipped: --no-torchrec") and "\n" not in line


class _NvStandIn(torch.nn.Module):
    """NVIDIA's module as correctness mode sees it: ``tables``, a storage that keeps what is inserted."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim, self.rows = dim, {}
        self.tables = self

    def value_dim(self, table: int) -> int:
        return self.dim

    def embedding_dim(self, table: int) -> int:
        return self.dim

    def insert(self, keys, table_ids, values) -> None:
        for k, t, v in zip(keys.tolist(), table_ids.tolist(), values, strict=True):
            self.rows[(t, k)] = v


def test_without_tbe_dyn_and_nv_start_from_the_same_rows() -> None:
    from suite.backends import build_dynamic_tables
    from suite.runner import Backend, mirror_rows

    cfg = replace(suite_configs("TestGpu", PRESETS["smoke"])[0], optimizer="sgd")
    dyn = build_dynamic_tables(cfg, cfg.hbm_bytes_per_table(list(cfg.caps)), CPU)
    nv = _NvStandIn(cfg.dim)
    mirror_rows(cfg, [Backend("dyn", dyn), Backend("nv", nv)], CPU)
    half = [cap // 2 for cap in cfg.caps]
    ids = torch.cat([torch.arange(h) for h in half])
    dyn.eval()
    with torch.no_grad():
        got = dyn(ids, torch.arange(ids.numel() + 1))
    expected = torch.stack([nv.rows[(t, k)] for t, h in enumerate(half) for k in range(h)])
    assert torch.equal(got, expected)
    assert torch.equal(torch.cat(list(reference_rows(cfg, cfg.seed, CPU, None))), expected)


def test_a_record_keeps_nv_beside_dyn_and_trc(tmp_path, monkeypatch) -> None:
    from embprof.workflow.provenance import collect_provenance
    from suite import runner
    from suite.configs import RunOptions
    from suite.records import RESULT_FIELDS, append_record, read_records
    from suite.runner import make_record, prepare, time_phases

    monkeypatch.setattr(runner, "pick_device", lambda: CPU)  # a GPU host too runs it on the CPU
    cfg = replace(suite_configs("TestGpu", PRESETS["smoke"])[0], optimizer="sgd", num_iterations=2)
    work = prepare(cfg, RunOptions(left_out={"trc": "--no-torchrec"}))
    assert [b.name for b in work.backends] == ["dyn"]
    record = make_record(work, [time_phases(work) for _ in range(2)], collect_provenance(ROOT, CPU, "torch"))
    assert list(record) == list(RESULT_FIELDS)
    assert record["trc_skip_reason"] == "--no-torchrec"
    assert record["nv_skip_reason"] == "NVIDIA dynamicemb runs on CUDA only"
    assert record["dyn_train_ms"] > 0 and record["nv_train_ms"] is None and record["timings"]["nv_train_ms"] is None
    append_record(tmp_path / "r.json", record)  # the contract's checks, nv's metrics among them
    assert read_records(tmp_path / "r.json")[0]["nv_eval_ms"] is None


def _nvidia_importable() -> bool:
    return torch.cuda.is_available() and nvidia.import_dynamicemb()[0] is not None


@pytest.mark.gpu
@pytest.mark.skipif(not _nvidia_importable(), reason="needs CUDA and NVIDIA's dynamicemb")
@pytest.mark.parametrize("rows_from", ["trc", "seed"])
@pytest.mark.parametrize("cfg", [c for s in SUITES for c in suite_configs(s, PRESETS["smoke"])], ids=lambda c: c.label)
def test_on_the_gpu_nv_builds_its_layout_and_matches_dyn(cfg, rows_from) -> None:
    """The real module at smoke size: the layout the plan says, and correctness mode's check of
    every train and eval step against dyn (and TBE, where it gives the rows)."""
    from suite.configs import RunOptions
    from suite.runner import prepare, time_phases, warm_up

    left_out = {} if rows_from == "trc" else {"trc": "--no-torchrec"}
    work = prepare(replace(cfg, num_iterations=3), RunOptions(correctness=True, left_out=left_out))
    names = [b.name for b in work.backends]
    assert "nv" in names and ("trc" in names) == (rows_from == "trc"), work.skip_reasons
    module = next(b.module for b in work.backends if b.name == "nv")
    assert module._storage_layout.name == nvidia.LAYOUTS[cfg.mode]
    warm_up(work)  # every step checked against dyn's outputs
    times = time_phases(work)
    assert times["nv"].train_ms > 0 and times["nv"].eval_ms > 0
