"""Inputs of the plots and the report in the formats of docs/DESIGN.md, written to tmp dirs.

Values are shaped like a smoke run's: a dyn breakdown with stages and op ranges,
a trc breakdown of TBE kernels without op ranges, timings in milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from embprof.labels import make_label, parse_label
from embprof.report.build import ReportInputs
from embprof.results.opcalls import COLUMNS as OPCALLS_COLUMNS
from embprof.results.paths import ResultsPaths
from embprof.results.samples import samples_of_rows, write_samples
from embprof.results.timings import TIMING_METRICS, timing_entry

NUM_ITERS = 5
# Each op's ms in the profiled iterations around its mean (they average to it exactly).
ITER_SHAPE = (0.96, 0.98, 1.0, 1.02, 1.04)
# (backend, phase, parent_stages, op, calls/iter, ms/iter, kernel names, fallback category)
DYN_ROWS = [
    ("dyn", "forward", "dynamicemb_prefetch", "segmented_unique", 2, 0.410, "aten::unique_dim", ""),
    ("dyn", "forward", "dynamicemb_prefetch", "cache_lookup", 2, 0.220, "aten::index_select", ""),
    ("dyn", "forward", "dynamicemb_prefetch/cache_miss", "storage_find", 2, 0.130, "aten::eq", ""),
    ("dyn", "forward", "DynamicEmbeddingFunction.forward", "gather_embedding", 2, 0.300, "aten::index_select", ""),
    ("dyn", "forward", "", "aten::copy_", 4, 0.050, "aten::copy_", "memcpy"),
    ("dyn", "backward", "DynamicEmbeddingFunction.backward", "reduce_grads", 2, 0.520, "aten::index_add_", ""),
    ("dyn", "backward", "DynamicEmbeddingFunction.backward", "optimizer_update_fused", 2, 0.270, "aten::add_", ""),
]
TRC_ROWS = [
    ("trc", "forward", "", "embedding_codegen_forward_unweighted", 1, 0.180, "fbgemm::split_embedding_codegen_lookup", "embedding"),
    ("trc", "backward", "", "embedding_codegen_backward_sgd", 1, 0.350, "fbgemm::split_embedding_backward_codegen", "embedding"),
    ("trc", "backward", "", "aten::zeros", 1, 0.020, "aten::zeros", "memset"),
]


# What the trace counted of copies and memsets (bytes per iteration, memory kinds); kernels: none.
COPIES = {"memcpy": (16384.0, "pinned->device"), "memset": (4096.0, "device")}


def opcalls_frame(scale: float = 1.0, with_trc: bool = True) -> pd.DataFrame:
    rows = DYN_ROWS + (TRC_ROWS if with_trc else [])
    return pd.DataFrame(
        [
            (b, ph, st, op, calls, ms * scale, ms * scale * NUM_ITERS, NUM_ITERS, kn, cat,
             *COPIES.get(cat, (np.nan, "")), 1.5 * ms * scale if not cat else np.nan)
            for b, ph, st, op, calls, ms, kn, cat in rows
        ],
        columns=list(OPCALLS_COLUMNS),
    )


def iteration_ns(frame: pd.DataFrame) -> np.ndarray:
    """Each row's whole ns in the profiled iterations, around its mean (ITER_SHAPE)."""
    return np.rint(frame["avg_ms_per_iter"].to_numpy()[:, None] * np.array(ITER_SHAPE) * 1e6).astype(np.int64)


def samples_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows' samples, long, as ``read_op_samples`` gives them."""
    return samples_of_rows(frame, iteration_ns(frame) / 1e6)


def legacy_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """The per-op table as CSVs of issues 20 to 32 held it: the samples in ``ms_by_iter``."""
    text = [";".join(f"{v:.6g}" for v in row) for row in iteration_ns(frame) / 1e6]
    return frame.assign(ms_by_iter=text)[[*OPCALLS_COLUMNS[:10], "ms_by_iter", *OPCALLS_COLUMNS[10:]]]


LABELS = [
    make_label(2, 256, 16, "sgd", "gpu", "none", [4096, 4096]),
    make_label(2, 256, 16, "sgd", "caching", "none", [4096, 4096], 0.5),
    make_label(2, 256, 16, "sgd", "caching", "none", [4096, 4096], 1.0),
    make_label(2, 256, 16, "sgd", "no_caching", "none", [4096, 4096]),
    make_label(2, 256, 16, "adam", "no_hbm", "none", [4096, 4096]),
    make_label(2, 256, 16, "exact_rowwise_adagrad", "gpu", "none", [4096, 8192]),
]


# Each metric's repeats around its median (the median itself is one of them).
REPEAT_SHAPE = (0.97, 0.99, 1.0, 1.01, 1.04)


def record(label: str, scale: float = 1.0, *, trc: bool = True, status: str = "ok") -> dict:
    """A timing record with DESIGN.md's fields (numbers shaped like a smoke run's, five repeats)."""
    dyn_f, dyn_b, trc_f, trc_b = 0.9 * scale, 1.3 * scale, 0.4 * scale, 0.7 * scale
    fields = parse_label(label)
    flat = {
        "label": label, "gpu_name": None, "device": "cpu", "num_tables": fields.num_tables,
        "batch_size": fields.total_batch // fields.num_tables, "embedding_dim": fields.dim,
        "optimizer_type": fields.optimizer, "caching": fields.mode == "caching",
        "cache_footprint_ratio": fields.cache_footprint_ratio,
        "pooling_mode": fields.pooling, "num_embeddings_per_feature": list(fields.caps),
        "feature_distribution": "pow-law", "alpha": 1.05, "max_hotness": 1,
        "avg_n_unique": 301.4 * scale, "avg_n_total": 512.0, "num_iterations": 5,
        "dyn_forward_ms": dyn_f, "dyn_backward_ms": dyn_b, "dyn_train_ms": dyn_f + dyn_b + 0.05,
        "dyn_eval_ms": 0.8 * scale,
        "trc_forward_ms": trc_f if trc else None, "trc_backward_ms": trc_b if trc else None,
        "trc_train_ms": trc_f + trc_b + 0.02 if trc else None,
        "trc_eval_ms": 0.35 * scale if trc else None,
        "trc_skip_reason": None if trc else "ADAM is not supported by TBE on the CPU",
        "torch": "2.13.0", "fbgemm_gpu": "1.8.0", "torchrec": "1.8.0", "status": status,
    }
    timings = {
        m: None if flat[m] is None else timing_entry([flat[m] * f for f in REPEAT_SHAPE])
        for m in TIMING_METRICS
    }
    return flat | {"repeats": len(REPEAT_SHAPE), "timer": "cpu_time", "timings": timings}


ENVIRONMENT = {
    "device": "cpu", "gpu_name": None, "driver": None, "cpu_name": "AMD EPYC 7B13",
    "python": "3.11.2", "torch": "2.13.0", "fbgemm_gpu": "1.8.0", "torchrec": "1.8.0",
    "snakemake": "9.27.1", "profiler": "torch", "nsys_version": None, "preset": "smoke",
    "date": "2026-11-30T15:00:00Z", "hostname": "ci-runner",
}
FAILED_TAIL = "Traceback (most recent call last):\n  File \"profile.py\", line 3\nRuntimeError: CUDA out of memory while profiling"


def report_inputs(root: Path, out: Path | None = None, compare_to: Path | None = None) -> ReportInputs:
    """The report of the results folder ``root``, written to ``out`` (default ``root/report``)."""
    return ReportInputs(ResultsPaths(root), out or root / "report", compare_to)


def write_results(root: Path, *, scale: float = 1.0, failed: str | None = LABELS[3],
                  busy: bool = True, walls: bool = True) -> Path:
    """A results/ folder as the workflow leaves it before the report step; ``failed`` crashed;
    ``walls`` False: sidecars without the profiled step's time (as written before it existed)."""
    for sub in ("opcalls", "status", "sunburst", "plots", "timing"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "configs.tsv").write_text(
        "test_id\tlabel\n" + "".join(f"suite/test_bench.py::test_step[{lab}]\t{lab}\n" for lab in LABELS)
    )
    records = []
    for i, label in enumerate(LABELS):
        ok = label != failed
        status = {
            "label": label, "test_id": f"suite/test_bench.py::test_step[{label}]", "ok": ok,
            "failed_step": None if ok else "profile", "returncode": 0 if ok else 1,
            "log": f"logs/profile/{label}.log", "log_tail": "" if ok else FAILED_TAIL,
        }
        (root / "status" / f"{label}.json").write_text(json.dumps(status))
        if not ok:
            continue
        trc = "adam" not in label
        records.append(record(label, scale * (1 + 0.1 * i), trc=trc))
        frame = opcalls_frame(scale * (1 + 0.1 * i), with_trc=trc)
        frame.to_csv(root / "opcalls" / f"opcalls__{label}.csv", index=False)
        write_samples(frame, iteration_ns(frame), root / "opcalls" / f"opcalls__{label}.samples.csv")
        if busy:
            per_backend = frame.groupby("backend")["avg_ms_per_iter"].sum() * 0.97
            # The profiled step: its busy time and as much again of time it kept the CPU idle.
            (root / "opcalls" / f"opcalls__{label}.busy.json").write_text(
                json.dumps({"busy_ms_per_iter": per_backend.to_dict(), "time_source": "cpu-leaf-ops"}
                           | ({"range_ms_per_iter": (per_backend * 2).to_dict(), "range_rule": "until-device-done"}
                              if walls else {}))
            )
    (root / "benchmark_results.json").write_text(json.dumps(records, indent=1))
    (root / "environment.json").write_text(json.dumps(ENVIRONMENT))
    return root
