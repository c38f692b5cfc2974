"""The backends under test, built from one config (NVIDIA's ``nv`` in :mod:`suite.nvidia`).

``dyn``: dynemb's BatchedDynamicEmbeddingTables. ``trc``: fbgemm_gpu's
SplitTableBatchedEmbeddingBagsCodegen (TBE), the kernel TorchRec runs, placed
as the storage mode asks: DEVICE (all in GPU memory), MANAGED_CACHING (a GPU
cache sized like dyn's, LRU) or MANAGED (unified memory); HOST with the CPU
kernels when there is no GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from .configs import BenchmarkConfig

# Optimizers fbgemm_gpu's CPU kernels implement (ADAM raises "not supported in CPU mode").
TBE_CPU_OPTIMIZERS = frozenset({"sgd"})
DYN_INIT_BOUND = 0.01  # uniform(-b, b) for new rows; the baseline starts from the same law


def build_dynamic_tables(
    cfg: BenchmarkConfig, hbm_bytes: list[int | None], device: torch.device
) -> torch.nn.Module:
    from dynemb import (
        BatchedDynamicEmbeddingTables,
        DynamicEmbInitializerArgs,
        DynamicEmbInitializerMode,
        DynamicEmbScoreStrategy,
        DynamicEmbTableOptions,
        EmbOptimType,
        PoolingMode,
    )

    options = [
        DynamicEmbTableOptions(
            dim=cfg.dim,
            max_capacity=cap,
            local_hbm_for_values=hbm,
            caching=cfg.caching,
            score_strategy=DynamicEmbScoreStrategy.TIMESTAMP,
            initializer_args=DynamicEmbInitializerArgs(
                mode=DynamicEmbInitializerMode.UNIFORM, lower=-DYN_INIT_BOUND, upper=DYN_INIT_BOUND
            ),
            eval_initializer_args=DynamicEmbInitializerArgs(
                mode=DynamicEmbInitializerMode.CONSTANT, value=0.0
            ),
            bucket_capacity=128,
        )
        for cap, hbm in zip(cfg.caps, hbm_bytes, strict=True)
    ]
    return BatchedDynamicEmbeddingTables(
        table_options=options,
        optimizer={"sgd": EmbOptimType.EXACT_SGD, "adam": EmbOptimType.ADAM}[cfg.optimizer],
        pooling_mode=getattr(PoolingMode, cfg.pooling.upper()),
        device=device,
        **cfg.optimizer_args,
    )


@dataclass(frozen=True)
class Baseline:
    """A backend's module beside dyn (TBE, NVIDIA's), or why there is none (then every one of
    its results is null and the record keeps the reason)."""

    module: torch.nn.Module | None
    skip_reason: str | None


def build_baseline(
    cfg: BenchmarkConfig, cache_rows: list[int], device: torch.device
) -> Baseline:
    """TBE for ``cfg``; ``cache_rows`` sizes its GPU cache in caching mode (same rows as dyn's)."""
    try:
        from fbgemm_gpu.split_embedding_configs import EmbOptimType as TbeOptim
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
            BoundsCheckMode,
            CacheAlgorithm,
            EmbeddingLocation,
            PoolingMode,
        )
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice,
            SplitTableBatchedEmbeddingBagsCodegen,
        )
    except ImportError as exc:
        return Baseline(None, f"fbgemm_gpu is not importable: {exc}")

    on_cuda = device.type == "cuda"
    if not on_cuda and cfg.optimizer not in TBE_CPU_OPTIMIZERS:
        return Baseline(None, f"fbgemm_gpu TBE has no {cfg.optimizer} on the CPU")

    extra: dict[str, object] = {}
    if not on_cuda:
        location, compute = EmbeddingLocation.HOST, ComputeDevice.CPU
    elif cfg.mode == "gpu":
        location, compute = EmbeddingLocation.DEVICE, ComputeDevice.CUDA
    elif cfg.mode == "caching":
        location, compute = EmbeddingLocation.MANAGED_CACHING, ComputeDevice.CUDA
        extra = {
            "cache_load_factor": sum(cache_rows) / sum(cfg.caps),
            "cache_algorithm": CacheAlgorithm.LRU,
        }
    else:
        location, compute = EmbeddingLocation.MANAGED, ComputeDevice.CUDA

    module = SplitTableBatchedEmbeddingBagsCodegen(
        embedding_specs=[(cap, cfg.dim, location, compute) for cap in cfg.caps],
        optimizer={"sgd": TbeOptim.EXACT_SGD, "adam": TbeOptim.ADAM}[cfg.optimizer],
        pooling_mode=getattr(PoolingMode, cfg.pooling.upper()),
        device=device,
        **cfg.optimizer_args,
        stochastic_rounding=False,
        bounds_check_mode=BoundsCheckMode.NONE,
        **extra,
    )
    return Baseline(module, None)


def reference_rows(
    cfg: BenchmarkConfig, seed: int, device: torch.device, tbe: torch.nn.Module | None
) -> Iterator[torch.Tensor]:
    """Correctness mode: each table's starting rows for ids [0, cap/2), the only ids it samples.

    Where TBE runs, its own seeded uniform(-b, b) rows (TBE's weights are its rows, the
    other backends receive a copy); without TBE the same law, drawn here from ``seed``.
    """
    if tbe is not None:
        torch.manual_seed(seed)
        tbe.init_embedding_weights_uniform(-DYN_INIT_BOUND, DYN_INIT_BOUND)
        for t, weights in enumerate(tbe.split_embedding_weights()):
            yield weights[: cfg.caps[t] // 2].detach().clone()
        return
    gen = torch.Generator(device=device).manual_seed(seed)
    for cap in cfg.caps:
        rows = torch.empty(cap // 2, cfg.dim, device=device)
        yield rows.uniform_(-DYN_INIT_BOUND, DYN_INIT_BOUND, generator=gen)


def load_dyn_rows(tables: torch.nn.Module, table: int, rows: torch.Tensor) -> None:
    """Correctness mode: ``rows`` become ids [0, len(rows)) of dyn's ``table``, with fresh state."""
    ids = torch.arange(rows.shape[0], dtype=torch.int64, device=rows.device)
    tables.load_table(table, ids, rows)
