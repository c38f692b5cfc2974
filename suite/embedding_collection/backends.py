"""The two sharded EmbeddingCollections under test, built identically on every rank.

``dyn``: dynemb's ShardedDynamicEmbeddingCollection, the 26 features over one
fused dynamic table sharded row-wise by id owner. ``trc``: TorchRec's
EmbeddingCollection, 26 tables sharded row-wise by DistributedModelParallel
with the planner, FBGEMM's fused optimizer, TorchRec's own index dedup when
asked. Both take a :class:`Batch` and return the sequence embeddings of every
id, which one backward call trains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .config import ECConfig
from .data import Batch

_FLOAT_BYTES = 4
_KEY_AND_SCORE_BYTES = 16  # per dynamic table slot: int64 key, int64 score


@dataclass
class Backend:
    """``forward(batch)`` -> embedding tensors whose rows follow the batch's ids (one or one per feature)."""

    name: str  # "dyn" | "trc": range name and label token
    module: torch.nn.Module
    prepare: Callable[[Batch], object]  # batch -> the module's input, built before timing
    forward: Callable[[object], list[torch.Tensor]]
    ids_sent: Callable[[], int] | None = None  # ids this rank has sent to owners so far (dyn only)


def dynemb_optimizer(name: str):  # noqa: ANN201 - dynemb.EmbOptimType, imported lazily
    from dynemb import EmbOptimType

    return EmbOptimType(name)


def fbgemm_optimizer(name: str):  # noqa: ANN201 - fbgemm's EmbOptimType, imported lazily
    from fbgemm_gpu.split_embedding_configs import EmbOptimType

    return {
        "exact_sgd": EmbOptimType.EXACT_SGD,
        "adam": EmbOptimType.ADAM,
        "exact_adagrad": EmbOptimType.EXACT_ADAGRAD,
        "exact_row_wise_adagrad": EmbOptimType.EXACT_ROWWISE_ADAGRAD,
    }[name]


def optimizer_state_floats(name: str, dim: int) -> int:
    from dynemb.optimizers import state_width

    return state_width(dynemb_optimizer(name), dim)


def table_bytes_per_rank(cfg: ECConfig, world_size: int) -> int:
    """Device bytes of one rank's shard of the tables and optimizer state (what must fit)."""
    rows = -(-sum(cfg.rows_per_feature) // world_size)
    row_bytes = (
        cfg.embedding_dim + optimizer_state_floats(cfg.optimizer, cfg.embedding_dim)
    ) * _FLOAT_BYTES
    return rows * (row_bytes + (_KEY_AND_SCORE_BYTES if cfg.use_dynamic_embedding else 0))


def build_dynamic(cfg: ECConfig, device: torch.device) -> Backend:
    from dynemb import DynamicEmbTableOptions
    from dynemb.distributed import OwnerPolicy, ShardedDynamicEmbeddingCollection

    fused = DynamicEmbTableOptions(
        dim=cfg.embedding_dim, max_capacity=sum(cfg.rows_per_feature), seed=cfg.seed
    )
    module = ShardedDynamicEmbeddingCollection(
        [fused],
        feature_tables=[0] * cfg.num_features,
        optimizer=dynemb_optimizer(cfg.optimizer),
        device=device,
        use_index_dedup=cfg.use_index_dedup,
        owner_policy=OwnerPolicy(cfg.owner_policy),
        learning_rate=cfg.learning_rate,
        eps=cfg.eps,
        beta1=cfg.beta1,
        beta2=cfg.beta2,
    )
    return Backend(
        name="dyn",
        module=module,
        prepare=lambda batch: (batch.ids, batch.offsets),
        forward=lambda inputs: [module(*inputs)],
        ids_sent=lambda: module.ids_sent,
    )


def torchrec_skip_reason(cfg: ECConfig, device: torch.device) -> str | None:
    """Why TorchRec's sharded EC cannot run this config on this device (probed, not assumed), else None."""
    import fbgemm_gpu  # noqa: F401 - registers the fbgemm operators probed below

    if cfg.use_index_dedup:
        op, key = "fbgemm::jagged_unique_indices", device.type.upper()
        try:
            has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key(op, key)
        except RuntimeError:  # the operator is not registered at all
            has_kernel = False
        if not has_kernel:
            return f"TorchRec's index dedup calls {op}, which this fbgemm_gpu build has no {key} kernel for"
    if device.type == "cpu":
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice,
            SplitTableBatchedEmbeddingBagsCodegen,
        )

        try:
            SplitTableBatchedEmbeddingBagsCodegen(
                [(1, cfg.embedding_dim, EmbeddingLocation.HOST, ComputeDevice.CPU)],
                optimizer=fbgemm_optimizer(cfg.optimizer),
            )
        except (AssertionError, RuntimeError, NotImplementedError, ValueError) as exc:
            return f"FBGEMM's CPU TBE cannot train with {cfg.optimizer}: {exc}"
    return None


def build_torchrec(
    cfg: ECConfig, device: torch.device, world_size: int, local_world_size: int
) -> Backend:
    import torchrec
    from torchrec.distributed.embedding import EmbeddingCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import (
        EmbeddingShardingPlanner,
        ParameterConstraints,
        Topology,
    )
    from torchrec.distributed.types import ShardingType

    names = [f"f_{f}" for f in range(cfg.num_features)]
    tables = [
        torchrec.EmbeddingConfig(
            name=f"t_{f}",
            embedding_dim=cfg.embedding_dim,
            num_embeddings=rows,
            feature_names=[names[f]],
        )
        for f, rows in enumerate(cfg.rows_per_feature)
    ]
    collection = torchrec.EmbeddingCollection(device=torch.device("meta"), tables=tables)
    sharder = EmbeddingCollectionSharder(
        fused_params={
            "optimizer": fbgemm_optimizer(cfg.optimizer),
            "learning_rate": cfg.learning_rate,
            "eps": cfg.eps,
            "beta1": cfg.beta1,
            "beta2": cfg.beta2,
        },
        use_index_dedup=cfg.use_index_dedup,
    )
    hbm = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    topology = Topology(
        world_size=world_size,
        compute_device=device.type,
        hbm_cap=hbm,
        local_world_size=local_world_size,
    )
    planner = EmbeddingShardingPlanner(
        topology=topology,
        batch_size=cfg.local_batch_size(world_size),
        constraints={
            t.name: ParameterConstraints(sharding_types=[ShardingType.ROW_WISE.value])
            for t in tables
        },
        debug=False,
    )
    plan = planner.collective_plan(collection, [sharder], dist.GroupMember.WORLD)
    model = DistributedModelParallel(
        module=collection, device=device, sharders=[sharder], plan=plan
    )

    def prepare(batch: Batch) -> torchrec.KeyedJaggedTensor:
        return torchrec.KeyedJaggedTensor(
            keys=names, values=batch.ids, lengths=batch.lengths, offsets=batch.offsets
        )

    def forward(kjt: torchrec.KeyedJaggedTensor) -> list[torch.Tensor]:
        out = model(kjt)
        return [out[name].values() for name in names]

    return Backend(name="trc", module=model, prepare=prepare, forward=forward)
