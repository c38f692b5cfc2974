"""The ``nv`` backend: NVIDIA's dynamicemb ``BatchedDynamicEmbeddingTablesV2``, built from a config.

Two parts. :func:`nvidia_plan` turns a config into the options NVIDIA's API takes, as plain
values (enum members by name), tested on the CPU. :func:`build_nvidia_tables` imports
``dynamicemb``, the one step that can fail (then the backend is skipped with its reason), and
builds the module from the plan.

NVIDIA's module chooses its storage from two sums over the tables: the bytes every row would
take (``max_capacity`` x (dim + optimizer state) x 4) and the GPU budget
(``local_hbm_for_values``). A budget that covers every row gives ``HBM_ONLY``; otherwise
``caching=True`` gives a GPU cache over host storage (``CACHING``), a zero budget host storage
only (``HOST_ONLY``), and any other budget one table split between GPU and host memory
(``HYBRID``). A cache or GPU tier holds ``max_capacity`` x budget / bytes rows of each table
(its hash table rounds that up to whole buckets of 1024).
The budget is what dyn keeps in GPU memory for the same config
(:meth:`~suite.configs.BenchmarkConfig.hbm_rows_per_table` x row bytes), so each suite
lands on its own layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

import torch

from .backends import DYN_INIT_BOUND, Baseline
from .configs import BenchmarkConfig

# The storage layout NVIDIA's module picks for each suite's storage mode (its ``StorageLayout``).
LAYOUTS = {"gpu": "HBM_ONLY", "caching": "CACHING", "no_caching": "HYBRID", "no_hbm": "HOST_ONLY"}
OPTIMIZERS = {"sgd": "EXACT_SGD", "adam": "ADAM"}  # fbgemm_gpu's EmbOptimType, which dynamicemb takes
BUCKET_CAPACITY = 128  # rows per hash-table bucket, as dyn's tables
INSERT_ROWS = 1 << 18  # correctness mode loads rows in chunks of this many (bounded workspace)


@dataclass(frozen=True)
class NvTable:
    """One table's ``DynamicEmbTableOptions`` (those the suite sets)."""

    dim: int
    max_capacity: int
    local_hbm_for_values: int  # bytes of GPU memory for rows and their optimizer state
    caching: bool


@dataclass(frozen=True)
class NvPlan:
    """Everything ``BatchedDynamicEmbeddingTablesV2`` is built from, as plain values."""

    tables: tuple[NvTable, ...]
    layout: str  # the StorageLayout these budgets give (NVIDIA's rule, module docstring)
    gpu_rows: tuple[int, ...]  # rows of each table NVIDIA keeps in GPU memory under that layout
    optimizer: str  # EmbOptimType member
    pooling: str  # DynamicEmbPoolingMode member
    optimizer_args: Mapping[str, float]  # learning_rate, eps, beta1, beta2, weight_decay
    init_bound: float  # training initializer: UNIFORM(-init_bound, init_bound); eval: CONSTANT 0
    score_strategy: str = "TIMESTAMP"  # DynamicEmbScoreStrategy member (LRU eviction), as dyn's
    bucket_capacity: int = BUCKET_CAPACITY

    @property
    def table_names(self) -> list[str]:
        return [f"t{i}" for i in range(len(self.tables))]


def storage_layout(total_bytes: int, hbm_bytes: int, caching: bool) -> str:
    """The layout NVIDIA's module picks for ``hbm_bytes`` of GPU budget over ``total_bytes`` of rows."""
    if total_bytes <= hbm_bytes:
        return "HBM_ONLY"
    if caching:
        return "CACHING"
    return "HOST_ONLY" if hbm_bytes <= 0 else "HYBRID"


def layout_gpu_rows(caps: list[int], total_bytes: int, hbm_bytes: int, layout: str) -> list[int]:
    """Rows of each table in GPU memory: all (HBM_ONLY), none (HOST_ONLY), else the budget's share."""
    if layout == "HBM_ONLY":
        return list(caps)
    if layout == "HOST_ONLY":
        return [0] * len(caps)
    scale = hbm_bytes / total_bytes
    return [min(cap, max(1, int(cap * scale))) for cap in caps]


def nvidia_plan(cfg: BenchmarkConfig, hbm_rows: list[int]) -> NvPlan:
    """NVIDIA's options for ``cfg`` with ``hbm_rows`` of each table in GPU memory (dyn's, for the
    same config and batches).

    A cache never covers a whole table: at the budget of every row NVIDIA's module drops the
    cache and keeps all rows in GPU memory, where dyn and TBE still cache (TBE's
    ``cache_load_factor`` 1.0), so a caching config's budget stops one row short of each table.
    """
    if cfg.caching:
        hbm_rows = [max(1, min(rows, cap - 1)) for rows, cap in zip(hbm_rows, cfg.caps, strict=True)]
    budgets = [rows * cfg.row_bytes for rows in hbm_rows]
    total = sum(cfg.caps) * cfg.row_bytes
    layout = storage_layout(total, sum(budgets), cfg.caching)
    if layout != LAYOUTS[cfg.mode]:
        raise ValueError(f"{cfg.label}: NVIDIA's dynamicemb would store it as {layout}, not {LAYOUTS[cfg.mode]}")
    return NvPlan(
        tables=tuple(
            NvTable(dim=cfg.dim, max_capacity=cap, local_hbm_for_values=hbm, caching=cfg.caching)
            for cap, hbm in zip(cfg.caps, budgets, strict=True)
        ),
        layout=layout,
        gpu_rows=tuple(layout_gpu_rows(list(cfg.caps), total, sum(budgets), layout)),
        optimizer=OPTIMIZERS[cfg.optimizer],
        pooling=cfg.pooling.upper(),
        optimizer_args=cfg.optimizer_args,
        init_bound=DYN_INIT_BOUND,
    )


def import_dynamicemb() -> tuple[ModuleType | None, str | None]:
    """NVIDIA's package with the module class, or why it does not import (one line).

    Any exception counts: its CUDA extension, fbgemm_gpu or torchrec can fail to load in more
    ways than ImportError, and a backend that cannot load is skipped, not fatal to the config.
    """
    try:
        import dynamicemb
        import dynamicemb.batched_dynamicemb_tables  # noqa: F401 - the module class lives here
    except Exception as exc:  # see the docstring
        first = str(exc).splitlines()[0] if str(exc) else ""
        return None, f"NVIDIA dynamicemb is not importable: {type(exc).__name__}: {first}"
    return dynamicemb, None


def build_nvidia_tables(cfg: BenchmarkConfig, hbm_rows: list[int], device: torch.device) -> Baseline:
    """NVIDIA's module for ``cfg`` on ``device``, or why there is none (CPU, package missing)."""
    if device.type != "cuda":
        return Baseline(None, "NVIDIA dynamicemb runs on CUDA only")
    try:
        plan = nvidia_plan(cfg, hbm_rows)
    except ValueError as exc:  # a config NVIDIA's module would store otherwise cannot be mirrored
        return Baseline(None, str(exc))
    dynamicemb, reason = import_dynamicemb()
    if dynamicemb is None:
        return Baseline(None, reason)
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode

    init = dynamicemb.DynamicEmbInitializerMode
    options = [
        dynamicemb.DynamicEmbTableOptions(
            index_type=torch.int64,
            embedding_dtype=torch.float32,
            dim=table.dim,
            max_capacity=table.max_capacity,
            local_hbm_for_values=table.local_hbm_for_values,
            caching=table.caching,
            bucket_capacity=plan.bucket_capacity,
            score_strategy=getattr(dynamicemb.DynamicEmbScoreStrategy, plan.score_strategy),
            initializer_args=dynamicemb.DynamicEmbInitializerArgs(
                mode=init.UNIFORM, lower=-plan.init_bound, upper=plan.init_bound
            ),
            eval_initializer_args=dynamicemb.DynamicEmbInitializerArgs(mode=init.CONSTANT, value=0.0),
        )
        for table in plan.tables
    ]
    module = dynamicemb.batched_dynamicemb_tables.BatchedDynamicEmbeddingTablesV2(
        table_options=options,
        table_names=plan.table_names,
        pooling_mode=getattr(dynamicemb.DynamicEmbPoolingMode, plan.pooling),
        output_dtype=torch.float32,
        device=device,
        optimizer=getattr(dynamicemb.EmbOptimType, plan.optimizer),
        **plan.optimizer_args,
        stochastic_rounding=False,
        bounds_check_mode=BoundsCheckMode.NONE,
    )
    built = getattr(getattr(module, "_storage_layout", None), "name", None)  # private: checked where present
    if built is not None and built != plan.layout:
        raise RuntimeError(f"{cfg.label}: NVIDIA's dynamicemb built {built}, the plan says {plan.layout}")
    return Baseline(module, None)


def load_nvidia_rows(module: torch.nn.Module, table: int, rows: torch.Tensor) -> None:
    """Correctness mode: ``rows`` become ids [0, len(rows)) of ``table``, optimizer state zero
    (as TBE's and dyn's start), written to the module's storage (its cache, if any, starts empty)."""
    storage = module.tables
    state_dim = storage.value_dim(table) - storage.embedding_dim(table)
    for start in range(0, rows.shape[0], INSERT_ROWS):
        chunk = rows[start : start + INSERT_ROWS].to(torch.float32)
        n, device = chunk.shape[0], chunk.device
        if state_dim:
            chunk = torch.cat([chunk, chunk.new_zeros(n, state_dim)], dim=1)
        keys = torch.arange(start, start + n, dtype=torch.int64, device=device)
        table_ids = torch.full((n,), table, dtype=torch.int64, device=device)
        storage.insert(keys, table_ids, chunk.contiguous())
