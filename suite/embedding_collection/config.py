"""What one EmbeddingCollection run measures: parsed once, identical on every rank.

Defaults are the reference system's: the 26 DLRM (Criteo) tables, 10 ids per
feature per sample, dim 128, ADAM (lr 0.1, eps 1e-3), global batch 65536, 10
warm-up and 100 timed iterations. The dynamic backend fuses the 26 tables into
one table (each feature's ids shifted by the rows of the features before it);
TorchRec's baseline keeps 26 tables, as the reference does.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import ECConfigError

DLRM_CRITEO_ROWS = (
    45833188, 36746, 17245, 7413, 20243, 3, 7114, 1441, 62, 29275261, 1572176, 345138, 10,
    2209, 11267, 128, 4, 974, 14, 48937457, 11316796, 40094537, 452104, 12606, 104, 35,
)  # fmt: skip
OPTIMIZERS = ("exact_sgd", "adam", "exact_adagrad", "exact_row_wise_adagrad")
PROFILERS = ("none", "torch", "nsys")
DEFAULT_RESULTS = Path("results/embedding_collection_results.json")


@dataclass(frozen=True)
class ECConfig:
    use_index_dedup: bool
    use_dynamic_embedding: bool
    batch_size: int  # global: samples over all ranks
    rows_per_feature: tuple[int, ...]
    multi_hot_sizes: tuple[int, ...]
    embedding_dim: int
    optimizer: str
    learning_rate: float
    eps: float
    beta1: float
    beta2: float
    iterations: int
    warmup: int
    seed: int
    owner_policy: str
    rows_scale: float
    results_file: Path
    profile: str
    trace_dir: Path | None
    profile_iterations: int
    timeout_s: int

    @property
    def num_features(self) -> int:
        return len(self.rows_per_feature)

    @property
    def backend_name(self) -> str:
        """The range and label token of the table backend: ``dyn`` or ``trc``."""
        return "dyn" if self.use_dynamic_embedding else "trc"

    def local_batch_size(self, world_size: int) -> int:
        return self.batch_size // world_size

    def label(self, world_size: int) -> str:
        """Config range name and trace file stem; starts ``T<n>_totalB`` as DESIGN.md's config ranges do."""
        hot = self.multi_hot_sizes[0] if len(set(self.multi_hot_sizes)) == 1 else "mixed"
        return (
            f"T{self.num_features}_totalB{self.batch_size * self.num_features}_D{self.embedding_dim}"
            f"_{self.optimizer}_ec_{self.backend_name}_dedup={'on' if self.use_index_dedup else 'off'}"
            f"_hot={hot}_ws={world_size}"
        )


def str2bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "t", "yes", "y", "1"):
        return True
    if lowered in ("false", "f", "no", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {value!r}")


def int_list(value: str) -> tuple[int, ...]:
    try:
        items = tuple(int(v) for v in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {value!r}"
        ) from None
    if any(v <= 0 for v in items):
        raise argparse.ArgumentTypeError(f"every value must be positive, got {value!r}")
    return items


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m suite.embedding_collection",
        description="Row-wise sharded EmbeddingCollection training step: dynamic tables or TorchRec's, under torchrun.",
    )
    p.add_argument(
        "--use-index-dedup",
        type=str2bool,
        default=True,
        help="deduplicate ids before the all-to-all",
    )
    p.add_argument(
        "--use-dynamic-embedding",
        type=str2bool,
        default=True,
        help="dynemb's sharded tables (True) or TorchRec's (False)",
    )
    p.add_argument(
        "--batch-size", type=int, default=65536, help="global batch (samples over all ranks)"
    )
    p.add_argument(
        "--num-embeddings-per-feature",
        type=int_list,
        default=DLRM_CRITEO_ROWS,
        help="rows of each feature's table (default: DLRM Criteo, 26 features)",
    )
    p.add_argument(
        "--multi-hot-sizes",
        type=int_list,
        default=None,
        help="ids per sample of each feature (default: 10 each)",
    )
    p.add_argument(
        "--rows-scale",
        type=float,
        default=1.0,
        help="multiply every table's rows (to fit fewer GPUs)",
    )
    p.add_argument("--embedding-dim", type=int, default=128)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--eps", type=float, default=1e-3)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--iterations", type=int, default=100, help="timed iterations")
    p.add_argument("--warmup", type=int, default=10, help="untimed iterations first")
    p.add_argument("--seed", type=int, default=1024)
    p.add_argument(
        "--owner-policy",
        choices=("hash", "modulo"),
        default="hash",
        help="how the dynamic tables pick an id's rank",
    )
    p.add_argument(
        "--results-file",
        type=Path,
        default=DEFAULT_RESULTS,
        help="JSON list the record is appended to",
    )
    p.add_argument(
        "--profile",
        choices=PROFILERS,
        default="none",
        help="torch: one Kineto trace per rank; nsys: cudaProfilerApi capture range",
    )
    p.add_argument(
        "--trace-dir",
        type=Path,
        default=None,
        help="where --profile torch writes <label>.rank<R>.kineto.json.gz",
    )
    p.add_argument(
        "--profile-iterations", type=int, default=3, help="iterations inside the profiled window"
    )
    p.add_argument(
        "--timeout-s",
        type=int,
        default=900,
        help="collective timeout: a rank that waits longer fails",
    )
    return p


def scaled_rows(rows: tuple[int, ...], scale: float) -> tuple[int, ...]:
    return tuple(max(1, math.ceil(r * scale)) for r in rows)


def parse_config(argv: list[str] | None = None) -> ECConfig:
    """Flags -> config; :class:`ECConfigError` for combinations no run can use."""
    a = build_parser().parse_args(argv)
    rows = a.num_embeddings_per_feature
    hot = a.multi_hot_sizes if a.multi_hot_sizes is not None else (10,) * len(rows)
    if len(hot) != len(rows):
        raise ECConfigError(f"--multi-hot-sizes has {len(hot)} values for {len(rows)} features")
    for name in ("batch_size", "embedding_dim", "iterations", "profile_iterations", "timeout_s"):
        if getattr(a, name) <= 0:
            raise ECConfigError(
                f"--{name.replace('_', '-')} must be positive, got {getattr(a, name)}"
            )
    if a.warmup < 0:
        raise ECConfigError(f"--warmup must be >= 0, got {a.warmup}")
    if not 0 < a.rows_scale <= 1:
        raise ECConfigError(f"--rows-scale must be in (0, 1], got {a.rows_scale}")
    if a.profile == "torch" and a.trace_dir is None:
        raise ECConfigError("--profile torch needs --trace-dir")
    return ECConfig(
        use_index_dedup=a.use_index_dedup,
        use_dynamic_embedding=a.use_dynamic_embedding,
        batch_size=a.batch_size,
        rows_per_feature=scaled_rows(rows, a.rows_scale),
        multi_hot_sizes=hot,
        embedding_dim=a.embedding_dim,
        optimizer=a.optimizer,
        learning_rate=a.learning_rate,
        eps=a.eps,
        beta1=a.beta1,
        beta2=a.beta2,
        iterations=a.iterations,
        warmup=a.warmup,
        seed=a.seed,
        owner_policy=a.owner_policy,
        rows_scale=a.rows_scale,
        results_file=a.results_file,
        profile=a.profile,
        trace_dir=a.trace_dir,
        profile_iterations=a.profile_iterations,
        timeout_s=a.timeout_s,
    )


def check_world(cfg: ECConfig, world_size: int) -> None:
    if cfg.batch_size % world_size:
        raise ECConfigError(
            f"--batch-size {cfg.batch_size} is not divisible by the {world_size} ranks"
        )
