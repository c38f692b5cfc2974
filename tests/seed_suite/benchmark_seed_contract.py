"""A CPU stand-in for a benchmark suite that keeps the reference system's contract (the README of
recsys-examples' corelib/dynamicemb/benchmark), for the workflow's tests of another suite.

Its test ids end in config labels written as NVIDIA's suite writes them (a cap
without a K/M suffix); a timing run appends one record with the seed's fields to
``$BENCHMARK_RESULTS_FILE``, timed on the CPU; ``--profile nsys`` only runs the
iterations (the nsys the tests give the workflow writes the trace). Setting
``SEED_SUITE_FAIL`` to a label makes that config's run fail, as a crashed config does.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

RESULTS_FILE = "BENCHMARK_RESULTS_FILE"
LABELS = ("T2_totalB32_D16_sgd_gpu_pool=none_cap=1000", "T2_totalB32_D16_adam_gpu_pool=none_cap=1000")


def _step_ms(rows: np.ndarray, ids: np.ndarray) -> float:
    start = time.perf_counter()
    rows[ids] += 0.1 * rows[ids]
    return (time.perf_counter() - start) * 1e3


def _record(label: str, iterations: int) -> dict:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((1000, 16))
    ids = rng.integers(0, 1000, 32)
    dyn = [float(np.mean([_step_ms(rows, ids) for _ in range(iterations)])) for _ in range(3)]
    trc = [float(np.mean([_step_ms(rows, ids) for _ in range(iterations)])) for _ in range(3)]
    return {
        "label": label, "gpu_name": "cpu", "num_tables": 2, "batch_size": 16, "embedding_dim": 16,
        "optimizer_type": label.split("_")[3], "caching": False, "cache_footprint_ratio": None,
        "pooling_mode": "none", "num_embeddings_per_feature": [1000, 1000],
        "avg_n_unique": float(len(np.unique(ids))), "avg_n_total": float(len(ids)),
        "dyn_forward_ms": dyn[0], "dyn_backward_ms": dyn[1], "dyn_train_ms": dyn[0] + dyn[1], "dyn_eval_ms": dyn[2],
        "trc_forward_ms": trc[0], "trc_backward_ms": trc[1], "trc_train_ms": trc[0] + trc[1], "trc_eval_ms": trc[2],
    }


class TestGpu:
    @pytest.mark.parametrize("label", LABELS, ids=lambda label: label)
    def test_gpu(self, label, request):
        if os.environ.get("SEED_SUITE_FAIL") == label:
            raise RuntimeError(f"{label}: failing as asked")
        iterations = request.config.getoption("--num-iterations") or 10
        if request.config.getoption("--profile") == "nsys":
            return
        path = os.environ.get(RESULTS_FILE, "benchmark_results.json")
        records = json.load(open(path)) if os.path.exists(path) else []
        records.append(_record(label, iterations))
        with open(path, "w") as f:
            json.dump(records, f, indent=2)
