"""Breakdown speed and memory against nsys-ai and against a bare column read.

    python benchmarks/bench_breakdown.py [--iters 100] [--small-iters 10] [--nsys-ai-python PY]
        [--baseline-src DIR]

Generates (once, cached under --cache-dir) an Nsight Systems export in the
real schema: 100 iterations of our range layout give about 1M kernels, 1M
runtime calls and 1.4M NVTX ranges, with a per-launch range inside every
launch (nested inside ops) and a second thread launching kernels while the
main thread is inside an op. Each measurement runs in its own process, so
its peak RSS is its own:

- ours: ``embprof.trace`` on the file, CSV and sidecar out;
- nsys-ai 0.3.0: ``nsys_ai.nvtx_attribution.attribute_kernels_to_nvtx`` on
  the same file (install it apart: ``pip install -r benchmarks/requirements.txt``
  into another venv and pass its python with --nsys-ai-python);
- bare read: the columns the breakdown needs, into Arrow tables, through
  the same ADBC SQLite driver the breakdown uses;
- with ``--baseline-src DIR`` (the ``src/`` of another commit, e.g. from
  ``git worktree add``): the same command run from that code, beside ours.

It prints a side-by-side table and the ratios the targets are stated in.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LABEL = "T10_totalB1048570_D128_adam_caching_pool=none_cap=25M_cfr=1.0"
MAIN_TID, SIDE_TID = 0x1000001, 0x1000002
GLOBAL_PID = 281487442182144
SLOT_NS = 1_000
OPS = ("cache_lookup", "storage_find", "gather_embedding", "reduce_grads", "optimizer_update_fused")


def _template(ops_per_phase: int, helpers: int, per_helper: int, trc_per_phase: int, side_per_iter: int):
    """One iteration's ranges and launches, times relative to the iteration start."""
    import numpy as np

    ranges: list[list] = []  # [start, end, name]
    launches: list[tuple[int, int, str, int]] = []  # (cpu time, thread, kernel name, kind: 0 kernel 1 memcpy)
    stack: list[int] = []
    t = 0

    def push(name: str) -> None:
        nonlocal t
        stack.append(len(ranges))
        ranges.append([t, -1, name])
        t += 10

    def pop() -> None:
        nonlocal t
        ranges[stack.pop()][1] = t
        t += 10

    def launch(kernel: str, kind: int = 0) -> None:
        nonlocal t
        launches.append((t, MAIN_TID, kernel, kind))
        t += SLOT_NS

    push("{iter}")
    push("dyn")
    dyn_start = t
    for phase in ("forward", "backward"):
        push(phase)
        push(f"DynamicEmbeddingFunction.{phase}")
        for o in range(ops_per_phase):
            op = OPS[o % len(OPS)]
            push(f"op:{op}")
            for h in range(helpers):
                push(f"{op}_helper{h}")
                for k in range(per_helper):
                    push("launch")
                    launch(f"{op}_kernel{k % 3}")
                    pop()
                pop()
            pop()
        launch("memcpy", 1)
        pop()
        pop()
    dyn_end = t
    pop()
    push("trc")
    for phase in ("forward", "backward"):
        push(phase)
        for k in range(trc_per_phase):
            push("aten::embedding_bag" if k % 2 else "aten::index_select")
            push("launch")
            launch("split_embedding_codegen_forward_kernel" if phase == "forward" else "split_embedding_backward_kernel")
            pop()
            pop()
        pop()
    pop()
    pop()
    side = np.linspace(dyn_start + SLOT_NS // 2, dyn_end - SLOT_NS, side_per_iter).astype(np.int64)
    launches += [(int(s), SIDE_TID, "side_stream_kernel", 0) for s in side]
    return ranges, sorted(launches), t + 10 * SLOT_NS


def generate(path: Path, iters: int, ops_per_phase: int = 300, side_per_iter: int = 1000) -> dict[str, int]:
    """Write the export; returns its row counts."""
    import numpy as np

    from embprof.atomic import atomic_path
    from embprof.trace.synth import write_export

    ranges, launches, iter_len = _template(ops_per_phase, 2, 5, 1500, side_per_iter)
    r = np.array([(s, e) for s, e, _ in ranges], dtype=np.int64)
    r_names = np.array([n for _, _, n in ranges], dtype=object)
    lt = np.array([x[0] for x in launches], dtype=np.int64)
    lthread = np.array([x[1] for x in launches], dtype=np.int64)
    lkind = np.array([x[3] for x in launches], dtype=np.int64)
    knames = sorted({x[2] for x in launches if x[3] == 0})
    strings = {i + 1: n for i, n in enumerate(knames)}
    strings[len(strings) + 1] = "cudaLaunchKernel"
    launch_name_id = len(strings)
    kid = np.array([knames.index(x[2]) + 1 if x[3] == 0 else 0 for x in launches], dtype=np.int64)
    # GPU side: one stream per launching thread, each kernel after the previous one ends.
    dur = 400 + (np.arange(len(lt)) * 7919) % 1800
    gstart = np.empty_like(lt)
    free = {MAIN_TID: 0, SIDE_TID: 0}
    for i in range(len(lt)):
        gstart[i] = max(lt[i] + 2_000, free[int(lthread[i])])
        free[int(lthread[i])] = gstart[i] + dur[i]
    n_l = len(lt)

    offs = np.arange(iters, dtype=np.int64) * iter_len + 1_000_000_000
    all_lt = (lt[None, :] + offs[:, None]).ravel()
    all_gs = (gstart[None, :] + offs[:, None]).ravel()
    all_ge = all_gs + np.tile(dur, iters)
    all_thread = np.tile(lthread, iters)
    all_kind = np.tile(lkind, iters)
    corr = np.arange(1, n_l * iters + 1, dtype=np.int64)
    gtid = GLOBAL_PID + all_thread - 0x1000000
    is_k = all_kind == 0
    kernels = {
        "start": all_gs[is_k], "end": all_ge[is_k], "streamId": np.where(all_thread[is_k] == MAIN_TID, 7, 13),
        "correlationId": corr[is_k], "globalPid": np.full(int(is_k.sum()), GLOBAL_PID),
        "nameId": np.tile(kid, iters)[is_k], "gridId": corr[is_k], "graphNodeId": [None] * int(is_k.sum()),
    }
    memcpy = {
        "start": all_gs[~is_k], "end": all_ge[~is_k], "streamId": np.full(int((~is_k).sum()), 7),
        "correlationId": corr[~is_k], "globalPid": np.full(int((~is_k).sum()), GLOBAL_PID),
        "copyKind": np.full(int((~is_k).sum()), 1),
    }
    runtime = {"start": all_lt, "end": all_lt + 800, "globalTid": gtid, "correlationId": corr,
               "nameId": np.full(len(corr), launch_name_id)}
    starts = (r[None, :, 0] + offs[:, None]).ravel()
    ends = (r[None, :, 1] + offs[:, None]).ravel()
    text = np.tile(r_names, iters)
    is_iter = np.tile(r_names == "{iter}", iters)
    text[is_iter] = [f"nsys_iter_{i}" for i in range(iters)]
    total_end = int(ends.max()) + 100
    nvtx = {
        "start": np.concatenate([[offs[0] - 100], starts]), "end": np.concatenate([[total_end], ends]),
        "eventType": np.full(len(starts) + 1, 59), "text": np.concatenate([[LABEL], text]),
        "globalTid": np.full(len(starts) + 1, GLOBAL_PID + MAIN_TID - 0x1000000),
        "textId": [None] * (len(starts) + 1), "domainId": np.zeros(len(starts) + 1, np.int64),
    }
    with atomic_path(path) as tmp:
        write_export(tmp, strings, {
            "CUPTI_ACTIVITY_KIND_KERNEL": kernels, "CUPTI_ACTIVITY_KIND_MEMCPY": memcpy,
            "CUPTI_ACTIVITY_KIND_RUNTIME": runtime, "NVTX_EVENTS": nvtx,
        })
    return {"kernels": int(is_k.sum()), "memcpy": int((~is_k).sum()), "runtime": len(corr), "nvtx": len(starts) + 1}


# ---- the measured programs, each run in a child process ----

def child_ours(path: str) -> None:
    """The command-line entry point itself (`embprof breakdown`): file in, CSV and sidecar out."""
    import embprof.trace  # noqa: F401 - imports are not part of the measured time
    from embprof.cli import main

    with tempfile.TemporaryDirectory() as out:
        t0, c0 = time.perf_counter(), time.process_time()
        rc = main(["breakdown", path, "--out-dir", out])
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows = sum(len(p.read_text().splitlines()) - 1 for p in Path(out).glob("*.csv"))
    if rc != 0:
        raise SystemExit(rc)
    _report(elapsed, cpu, f"{rows} rows")


def child_bare(path: str) -> None:
    """The same columns the breakdown selects, through the same ADBC driver, into Arrow: nothing else."""
    from embprof.trace.columns import BulkReader

    t0, c0 = time.perf_counter(), time.process_time()
    bulk = BulkReader(Path(path))
    queries = (
        "SELECT start, end, correlationId, globalPid, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "SELECT start, end, correlationId, globalPid, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        "SELECT correlationId, globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        "SELECT start, end, globalTid, coalesce(textId, -1), coalesce(text, '') FROM NVTX_EVENTS "
        "WHERE eventType = 59 AND domainId = 0",
    )
    tables = [bulk.table(q) for q in queries]
    bulk.close()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    _report(elapsed, cpu, f"{sum(t.num_rows for t in tables)} rows")


def child_nsys_ai(path: str) -> None:
    import sqlite3

    from nsys_ai.nvtx_attribution import attribute_kernels_to_nvtx

    t0, c0 = time.perf_counter(), time.process_time()
    conn = sqlite3.connect(path)
    rows = attribute_kernels_to_nvtx(conn, sqlite_path=path)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    _report(elapsed, cpu, f"{len(rows)} rows")


def _report(elapsed: float, cpu: float, what: str) -> None:
    # VmHWM, not ru_maxrss: the latter survives exec and would report the parent's peak.
    with open("/proc/self/status") as fh:
        rss_mb = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    print(json.dumps({"seconds": elapsed, "cpu_seconds": cpu, "rss_mb": rss_mb, "what": what}))


CHILDREN = {"ours": child_ours, "bare": child_bare, "nsys_ai": child_nsys_ai}


OWN_SRC = Path(__file__).resolve().parents[1] / "src"


def run_child(python: str, which: str, path: Path, src: Path = OWN_SRC) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    proc = subprocess.run([python, __file__, "--child", which, str(path)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{which} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(programs: dict[str, tuple], repeat: int) -> dict[str, dict]:
    """Each program in a fresh process, ``repeat`` rounds interleaved so all see the same load.

    The best wall and CPU time of each count (separately); peak RSS is the largest seen.
    """
    runs: dict[str, list[dict]] = {name: [] for name in programs}
    for _ in range(repeat):
        for name, program in programs.items():
            runs[name].append(run_child(*program))
    return {
        name: {
            "seconds": min(r["seconds"] for r in rs), "cpu_seconds": min(r["cpu_seconds"] for r in rs),
            "rss_mb": max(r["rss_mb"] for r in rs), "what": rs[0]["what"],
        }
        for name, rs in runs.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--small-iters", type=int, default=10)
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "embprof-bench")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per program; the best run counts")
    ap.add_argument("--nsys-ai-python", default=os.environ.get("NSYS_AI_PYTHON", "/tmp/benchvenv/bin/python"))
    ap.add_argument("--baseline-src", type=Path, help="another commit's src/: its breakdown runs beside ours")
    ap.add_argument("--child", nargs=2, metavar=("WHICH", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        CHILDREN[args.child[0]](args.child[1])
        return

    args.cache_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for iters in (args.small_iters, args.iters):
        path = args.cache_dir / f"bench_{iters}iters.sqlite"
        if not path.exists():
            t0 = time.perf_counter()
            counts = generate(path, iters)
            print(f"generated {path.name}: {counts} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        files[iters] = path

    big, small = files[args.iters], files[args.small_iters]
    programs = {
        "ours": (sys.executable, "ours", big),
        "bare": (sys.executable, "bare", big),
        "ours_small": (sys.executable, "ours", small),
    }
    if Path(args.nsys_ai_python).exists():
        programs["nsys_ai"] = (args.nsys_ai_python, "nsys_ai", big)
    if args.baseline_src:
        programs["baseline"] = (sys.executable, "ours", big, args.baseline_src.resolve())
    got = measure(programs, args.repeat)
    ours, bare, ours_small, nsys_ai = got["ours"], got["bare"], got["ours_small"], got.get("nsys_ai")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    def line(name: str, m: dict) -> None:
        print(f"{name:<36}{m['seconds']:>9.2f}{m['cpu_seconds']:>9.2f}{m['rss_mb']:>13.0f}  {m['what']}")

    print(f"{'program':<36}{'wall s':>9}{'CPU s':>9}{'peak RSS MB':>13}  output")
    line("embprof breakdown (file -> CSV)", ours)
    if nsys_ai:
        line("nsys-ai attribute_kernels_to_nvtx", nsys_ai)
    line("bare read of needed columns", bare)
    line(f"embprof at {args.small_iters} iterations", ours_small)
    if "baseline" in got:
        line(f"embprof from {args.baseline_src}", got["baseline"])
    print()

    def ratio(a: dict, b: dict) -> str:
        return f"{a['seconds'] / b['seconds']:.2f}x wall, {a['cpu_seconds'] / b['cpu_seconds']:.2f}x CPU"

    if nsys_ai:
        print(f"nsys-ai / ours: {ratio(nsys_ai, ours)} (target >= 5x)")
    else:
        print(f"nsys-ai not measured: no {args.nsys_ai_python} (see benchmarks/README.md)")
    print(f"ours / bare read: {ratio(ours, bare)} (target <= 1.5x)")
    print(f"peak RSS: {ours['rss_mb']:.0f} MB (target <= 400 MB)")
    scale = args.iters / args.small_iters
    print(f"ours at {scale:.0f}x the kernels: {ratio(ours, ours_small)} (target <= {1.2 * scale:.0f}x)")
    if "baseline" in got:
        print(f"ours / {args.baseline_src}: {ratio(ours, got['baseline'])}")


if __name__ == "__main__":
    main()
