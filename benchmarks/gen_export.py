"""Generated Nsight Systems exports of our range layout, at any size, for the breakdown benchmark.

    python benchmarks/gen_export.py OUT.sqlite --iters 100 --names many|few [--shape wide|long]

``--shape wide`` (the default): one iteration holds 10,000 kernels launched from the main thread (6,000 under
``op:*`` ranges of the dynamic tables, each in its own per-launch range nested
inside a helper range inside the op; 3,000 of the baseline, each in a
per-launch range inside an ``aten::`` range, under no op; 2 memcpys) and
1,000 kernels launched from a second thread while the main thread is inside
ops, as PyTorch's autograd engine does: that thread holds no config,
iteration, backend or phase of its own, only a stage and an op, each launch in
a per-launch range inside the op, and its kernels take the main thread's
context. 100 iterations give 1M kernels.

``--names few``: every per-launch range is called ``launch``. ``--names many``:
the per-launch ranges inside ops, on both threads, are named as
PyTorch names its per-launch ranges, ``aten::<op>, seq = <n>`` with a new
``n`` each time: about 700,000 distinct names at 100 iterations.

``--shape long``: many short iterations, as a long training run profiled whole
gives: one iteration holds 42 work items (5 ops per phase of the dynamic tables,
each one helper range of 2 launches; 5 baseline launches per phase; 2 memcpys;
10 launches from the second thread), so 24,000 iterations give 1M, and the per-op
table has 16 rows of 24,000 samples each.

Rows are written in start order, as Nsight Systems writes its tables, in
blocks of iterations, so a 10M-kernel export never needs all its rows in memory.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from embprof.atomic import atomic_path
from embprof.trace.synth import write_export

LABEL = "T10_totalB1048570_D128_adam_caching_pool=none_cap=25M_cfr=1.0"
MAIN_TID, SIDE_TID = 0x1000001, 0x1000002
GLOBAL_PID = 281487442182144
SLOT_NS = 1_000
OPS = ("cache_lookup", "storage_find", "gather_embedding", "reduce_grads", "optimizer_update_fused")
SEQ = "{seq}"  # a per-launch name, made distinct in --names many
BLOCK_ITERS = 20
# Template arguments per shape: ops per phase, helpers per op, launches per helper, baseline
# launches per phase, second-thread launches per iteration.
SHAPES = {"wide": (300, 2, 5, 1500, 1000), "long": (5, 1, 2, 5, 10)}


class Template:
    """One iteration's ranges and launches, times relative to the iteration start."""

    def __init__(self, names: str, ops_per_phase: int = 300, helpers: int = 2, per_helper: int = 5,
                 trc_per_phase: int = 1500, side_per_iter: int = 1000) -> None:
        self.ranges: list[list] = []  # [start, end, name, thread]
        self.launches: list[tuple[int, int, str, int]] = []  # (cpu time, thread, kernel, kind 0 kernel 1 memcpy)
        self._stack: list[int] = []
        self._t = 0
        many = names == "many"
        self._push("{iter}")
        self._push("dyn")
        dyn_start = self._t
        for phase in ("forward", "backward"):
            self._push(phase)
            self._push(f"DynamicEmbeddingFunction.{phase}")
            for o in range(ops_per_phase):
                op = OPS[o % len(OPS)]
                self._push(f"op:{op}")
                for h in range(helpers):
                    self._push(f"{op}_helper{h}")
                    for k in range(per_helper):
                        self._push(f"aten::{op}_{k % 3}, {SEQ}" if many else "launch")
                        self._launch(f"{op}_kernel{k % 3}")
                        self._pop()
                    self._pop()
                self._pop()
            self._launch("memcpy", 1)
            self._pop()
            self._pop()
        dyn_end = self._t
        self._pop()
        self._push("trc")
        for phase in ("forward", "backward"):
            self._push(phase)
            for k in range(trc_per_phase):
                self._push("aten::embedding_bag" if k % 2 else "aten::index_select")
                self._push("launch")
                self._launch("split_embedding_codegen_forward_kernel" if phase == "forward"
                             else "split_embedding_backward_kernel")
                self._pop()
                self._pop()
            self._pop()
        self._pop()
        self._pop()
        side = np.linspace(dyn_start + SLOT_NS // 2, dyn_end - SLOT_NS, side_per_iter).astype(np.int64)
        self.ranges.append([dyn_start + 1, dyn_end - 1, "DynamicEmbeddingFunction.backward", SIDE_TID])
        self.ranges.append([dyn_start + 2, dyn_end - 2, "op:reduce_grads", SIDE_TID])
        for s in side.tolist():
            self.launches.append((s, SIDE_TID, "side_stream_kernel", 0))
            self.ranges.append([s - 5, s + 5, f"autograd::engine::evaluate_function: MulBackward0, {SEQ}"
                                if many else "launch", SIDE_TID])
        self.launches.sort()
        self.length = self._t + 10 * SLOT_NS

    def _push(self, name: str) -> None:
        self._stack.append(len(self.ranges))
        self.ranges.append([self._t, -1, name, MAIN_TID])
        self._t += 10

    def _pop(self) -> None:
        self.ranges[self._stack.pop()][1] = self._t
        self._t += 10

    def _launch(self, kernel: str, kind: int = 0) -> None:
        self.launches.append((self._t, MAIN_TID, kernel, kind))
        self._t += SLOT_NS


def _blocks(tpl: Template, iters: int, strings: dict[str, int]) -> Iterator[dict]:
    """The export's rows, a block of iterations at a time (about BLOCK_ITERS x 10,000 launches),
    each table in start order."""
    r_start = np.array([r[0] for r in tpl.ranges], np.int64)
    r_end = np.array([r[1] for r in tpl.ranges], np.int64)
    r_tid = np.array([r[3] for r in tpl.ranges], np.int64)
    r_name = [r[2] for r in tpl.ranges]
    seq_at = [i for i, n in enumerate(r_name) if SEQ in n]
    r_order = np.argsort(r_start, kind="stable")
    lt = np.array([x[0] for x in tpl.launches], np.int64)
    lthread = np.array([x[1] for x in tpl.launches], np.int64)
    lkind = np.array([x[3] for x in tpl.launches], np.int64)
    kid = np.array([strings[x[2]] if x[3] == 0 else 0 for x in tpl.launches], np.int64)
    # GPU side: one stream per launching thread, each kernel after the previous one ends.
    dur = 400 + (np.arange(len(lt)) * 7919) % 1800
    gstart = np.empty_like(lt)
    free = {MAIN_TID: 0, SIDE_TID: 0}
    for i in range(len(lt)):
        gstart[i] = max(lt[i] + 2_000, free[int(lthread[i])])
        free[int(lthread[i])] = gstart[i] + dur[i]
    g_order = np.argsort(gstart, kind="stable")
    n_l, seq = len(lt), 0
    per_block = max(BLOCK_ITERS, BLOCK_ITERS * 10_000 // n_l)
    for first in range(0, iters, per_block):
        its = np.arange(first, min(first + per_block, iters), dtype=np.int64)
        offs = its * tpl.length + 1_000_000_000
        corr = (its[:, None] * n_l + np.arange(1, n_l + 1)[None, :]).ravel()
        gs = (gstart[g_order][None, :] + offs[:, None]).ravel()
        g_corr = (its[:, None] * n_l + 1 + g_order[None, :]).ravel()
        g_kind = np.tile(lkind[g_order], len(its))
        g_dur = np.tile(dur[g_order], len(its))
        k = g_kind == 0
        kernels = {"start": gs[k], "end": gs[k] + g_dur[k], "streamId": np.where(np.tile(lthread[g_order], len(its))[k] == MAIN_TID, 7, 13),
                   "correlationId": g_corr[k], "globalPid": np.full(int(k.sum()), GLOBAL_PID),
                   "nameId": np.tile(kid[g_order], len(its))[k], "gridId": g_corr[k]}
        memcpy = {"start": gs[~k], "end": gs[~k] + g_dur[~k], "streamId": np.full(int((~k).sum()), 7),
                  "correlationId": g_corr[~k], "globalPid": np.full(int((~k).sum()), GLOBAL_PID),
                  "copyKind": np.full(int((~k).sum()), 1)}
        calls = (lt[None, :] + offs[:, None]).ravel()
        runtime = {"start": calls, "end": calls + 800, "globalTid": GLOBAL_PID + np.tile(lthread, len(its)) - 0x1000000,
                   "correlationId": corr, "nameId": np.full(len(corr), strings["cudaLaunchKernel"])}
        names: list[str] = []
        for it in its.tolist():
            block = list(r_name)
            block[0] = f"nsys_iter_{it}"
            for i in seq_at:
                block[i] = block[i].replace(SEQ, f"seq = {seq}")
                seq += 1
            names += [block[i] for i in r_order.tolist()]
        nvtx = {
            "start": (r_start[r_order][None, :] + offs[:, None]).ravel(),
            "end": (r_end[r_order][None, :] + offs[:, None]).ravel(),
            "eventType": np.full(len(names), 59), "text": names,
            "globalTid": GLOBAL_PID + np.tile(r_tid[r_order], len(its)) - 0x1000000,
            "domainId": np.zeros(len(names), np.int64),
        }
        yield {"NVTX_EVENTS": nvtx, "CUPTI_ACTIVITY_KIND_RUNTIME": runtime,
               "CUPTI_ACTIVITY_KIND_KERNEL": kernels, "CUPTI_ACTIVITY_KIND_MEMCPY": memcpy}


def generate(path: Path, iters: int, names: str = "few", shape: str = "wide") -> dict[str, int]:
    """Write the export (atomically); returns its row counts."""
    tpl = Template(names, *SHAPES[shape])
    kernel_names = sorted({x[2] for x in tpl.launches if x[3] == 0})
    strings = {n: i + 1 for i, n in enumerate([*kernel_names, "cudaLaunchKernel"])}
    tpl_len = tpl.length
    config = {"NVTX_EVENTS": {
        "start": [1_000_000_000 - 100], "end": [1_000_000_000 + iters * tpl_len + 100], "eventType": [59],
        "text": [LABEL], "globalTid": [GLOBAL_PID + MAIN_TID - 0x1000000], "domainId": [0],
    }}
    counts = {"kernels": 0, "memcpy": 0, "runtime": 0, "nvtx": 1}

    def counted(blocks):
        for b in blocks:
            counts["kernels"] += len(b["CUPTI_ACTIVITY_KIND_KERNEL"]["start"])
            counts["memcpy"] += len(b["CUPTI_ACTIVITY_KIND_MEMCPY"]["start"])
            counts["runtime"] += len(b["CUPTI_ACTIVITY_KIND_RUNTIME"]["start"])
            counts["nvtx"] += len(b["NVTX_EVENTS"]["start"])
            yield b

    empty = {t: {c: [] for c in cols} for t, cols in next(_blocks(tpl, 1, strings)).items()}
    with atomic_path(path, suffix=".sqlite") as tmp:
        write_export(tmp, {i: n for n, i in strings.items()}, {**empty, **config},
                     counted(_blocks(tpl, iters, strings)))
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--names", choices=("few", "many"), default="few")
    ap.add_argument("--shape", choices=tuple(SHAPES), default="wide",
                    help="wide: 10,000 kernels per iteration; long: 42 work items per iteration")
    args = ap.parse_args()
    t0 = time.perf_counter()
    counts = generate(args.out, args.iters, args.names, args.shape)
    print(f"{args.out}: {counts} in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
