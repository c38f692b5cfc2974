"""The breakdown against its floor (a bare read of the columns it needs) and against nsys-ai.

    python benchmarks/bench_breakdown.py [--repeat 3] [--sizes 10,100,400] [--names many,few]
        [--big 1000] [--long 24000] [--nsys-ai-python PY] [--nsys-ai-sizes 100,400] [--cache-dir DIR]
        [--json OUT] [--baseline-src DIR | --baseline-python PY] [--baseline-sizes 100,400]

Exports are generated once (``benchmarks/gen_export.py``: 10,000 kernels per
iteration, so sizes 10, 100, 400 and 1000 are 100K, 1M, 4M and 10M kernels),
with many distinct range names (PyTorch's ``..., seq = N``) and with few, and
cached under ``--cache-dir`` (default ``$TMPDIR/embprof-bench``; the 10M one is
about 2.3 GB), each file named by a digest of the generator's code, so that an
edit of it makes new ones. ``--long ITERS`` adds the long shape (``gen_export.py --shape long``:
42 work items per iteration, many names, so 24,000 iterations are 1M and every
per-op row has 24,000 samples). Every measurement is a whole process, start-up included, run
from this parent (which imports nothing heavy, so the child's peak RSS is its
own), the programs interleaved round by round so that all see the same load:

- ``ours``: ``embprof breakdown FILE --out-dir TMP`` (file in, CSV and sidecar out);
- ``floor``: the columns the breakdown needs read into Arrow through the same
  ADBC SQLite driver, without pandas (``adbc_driver_manager``'s statements);
- ``baseline`` (with ``--baseline-src DIR``, the ``src/`` of another commit, e.g.
  from ``git worktree add`` or ``git archive``; or ``--baseline-python PY``, the
  python of another checkout's venv): that code's ``embprof breakdown`` beside ours;
- ``nsys-ai``: nsys-ai 0.3.0's ``attribute_kernels_to_nvtx`` on the same file,
  from its own venv (``python3 -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip
  install -r benchmarks/requirements.txt``).

Each embprof tree the rounds run (ours, the baseline's) is compiled to bytecode first, as
an installed package is: where ``PYTHONDONTWRITEBYTECODE`` is set, every measured
process would otherwise compile embprof's modules again (some 0.05 s), a cost that
neither an installed copy nor the floor's packages pay.

CPU seconds (user + system, every thread) and wall seconds are given as the
min and the median over the rounds; peak RSS as the max. Then the ratios the
targets of issue 18 are stated in.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS_PER_ITER = {"wide": 10_000, "long": 42}
FLOOR_QUERIES = (
    "SELECT start, end, correlationId, globalPid, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "SELECT start, end, correlationId, globalPid, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    "SELECT correlationId, globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    "SELECT start, end, globalTid, textId, text FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = 0",
)


# ---- the measured programs that are not the embprof command, each run as its own process ----

def child_floor(path: str) -> None:
    """The columns the breakdown selects, through the same driver, into Arrow: nothing else."""
    import adbc_driver_manager
    import adbc_driver_sqlite
    import pyarrow as pa

    db = adbc_driver_sqlite.connect(f"file:{path}?mode=ro&immutable=1")
    conn = adbc_driver_manager.AdbcConnection(db)
    rows = 0
    for sql in FLOOR_QUERIES:
        stmt = adbc_driver_manager.AdbcStatement(conn)
        stmt.set_sql_query(sql)
        handle, _ = stmt.execute_query()
        rows += pa.RecordBatchReader.from_stream(handle).read_all().num_rows
        stmt.close()
    conn.close()
    db.close()
    if "pandas" in sys.modules:
        raise SystemExit("the floor imported pandas")
    print(f"{rows} rows")


def child_nsys_ai(path: str) -> None:
    import sqlite3

    from nsys_ai.nvtx_attribution import attribute_kernels_to_nvtx

    rows = attribute_kernels_to_nvtx(sqlite3.connect(path), sqlite_path=path)
    print(f"{len(rows)} rows")


# ---- measuring ----

def timed(argv: list[str]) -> dict:
    """One whole process: wall seconds, CPU seconds of it and all its threads, peak RSS (MB).

    Forked and waited for with ``os.wait4``, whose rusage is the child's alone.
    """
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        devnull = os.open(os.devnull, os.O_WRONLY)
        err = os.open(os.devnull, os.O_WRONLY) if os.environ.get("BENCH_QUIET", "1") == "1" else 2
        os.dup2(devnull, 1)
        os.dup2(err, 2)
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:5])} failed with exit {os.waitstatus_to_exitcode(status)}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def stats(runs: list[dict]) -> dict:
    return {
        "cpu_min": min(r["cpu"] for r in runs), "cpu_median": statistics.median(r["cpu"] for r in runs),
        "wall_min": min(r["wall"] for r in runs), "wall_median": statistics.median(r["wall"] for r in runs),
        "rss_mb": max(r["rss_mb"] for r in runs), "runs": len(runs), "cpu": [r["cpu"] for r in runs],
    }


def round_ratios(a: dict, b: dict) -> tuple[float, float]:
    """Min and median over the rounds of a's CPU time over b's in the same round (both saw its load)."""
    ratios = [x / y for x, y in zip(a["cpu"], b["cpu"], strict=True)]
    return min(ratios), statistics.median(ratios)


def generator_digest() -> str:
    """A digest of the code that writes the exports (gen_export.py and the synthetic writer it calls): a cached
    export made by an earlier version of them is never reused (one of the long shape, from before its names
    changed, held 240,000 distinct names where the current one has 10)."""
    digest = hashlib.sha256()
    for source in (HERE / "gen_export.py", HERE.parent / "src" / "embprof" / "trace" / "synth.py"):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:10]


def export(cache: Path, iters: int, names: str, python: str, shape: str = "wide") -> Path:
    path = cache / f"bench_{names}_{iters}iters{'' if shape == 'wide' else '_' + shape}_{generator_digest()}.sqlite"
    if not path.exists():
        subprocess.run([python, str(HERE / "gen_export.py"), str(path), "--iters", str(iters), "--names", names,
                        "--shape", shape], check=True)
    return path


def kernels(case: tuple) -> int:
    """Work items of a case (names, iterations[, shape])."""
    return case[1] * KERNELS_PER_ITER[case[2] if len(case) > 2 else "wide"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="rounds; every program runs once per round")
    ap.add_argument("--sizes", default="10,100,400", help="iterations of the generated exports (x10,000 kernels)")
    ap.add_argument("--names", default="many,few")
    ap.add_argument("--big", type=int, default=1000, help="iterations of the bounded-memory case (0: skip)")
    ap.add_argument("--long", type=int, default=0,
                    help="iterations of the long shape (42 work items each; 24000: 1M; 0: skip)")
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "embprof-bench")
    ap.add_argument("--nsys-ai-python", default=os.environ.get("NSYS_AI_PYTHON", "/tmp/benchvenv/bin/python"))
    ap.add_argument("--nsys-ai-sizes", default="100,400", help="sizes nsys-ai runs at (many names)")
    ap.add_argument("--baseline-src", type=Path, help="another commit's src/: its breakdown runs beside ours")
    ap.add_argument("--baseline-python", help="the python of another checkout's venv: its breakdown runs beside ours")
    ap.add_argument("--baseline-sizes", default="100,400", help="sizes the baseline runs at")
    ap.add_argument("--json", type=Path, help="write every figure here too")
    ap.add_argument("--child", nargs=2, metavar=("WHICH", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        {"floor": child_floor, "nsys_ai": child_nsys_ai}[args.child[0]](args.child[1])
        return

    python = sys.executable
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    names = [n for n in args.names.split(",") if n]
    cases = [(n, s) for n in names for s in sizes] + ([("many", args.big)] if args.big else [])
    cases += [("many", args.long, "long")] if args.long else []
    files = {case: export(args.cache_dir, case[1], case[0], python, *case[2:]) for case in cases}
    nsys_ai = Path(args.nsys_ai_python).exists()
    nsys_ai_sizes = {int(s) for s in args.nsys_ai_sizes.split(",") if s} if nsys_ai else set()
    out_dir = Path(tempfile.mkdtemp(prefix="bench_breakdown_"))
    baseline = _baseline(args)
    programs = {}
    for case, path in files.items():
        programs[(case, "ours")] = [python, "-m", "embprof", "breakdown", str(path), "--out-dir", str(out_dir)]
        programs[(case, "floor")] = [python, __file__, "--child", "floor", str(path)]
        if case[0] == "many" and case[1] in nsys_ai_sizes:
            programs[(case, "nsys-ai")] = [args.nsys_ai_python, __file__, "--child", "nsys_ai", str(path)]
        if baseline and (case[1] in {int(s) for s in args.baseline_sizes.split(",") if s} or len(case) > 2):
            programs[(case, "baseline")] = [*baseline, "-m", "embprof", "breakdown", str(path),
                                            "--out-dir", str(out_dir / "baseline")]
    precompile([_embprof_dir(), *([args.baseline_src / "embprof"] if args.baseline_src else [])])
    runs: dict = {key: [] for key in programs}
    loads = []
    for _ in range(args.repeat):
        loads.append(os.getloadavg()[0])
        for key, argv in programs.items():
            runs[key].append(timed(argv))
    loads.append(os.getloadavg()[0])
    got = {key: stats(r) for key, r in runs.items()}
    report(got, cases, loads, args)
    if args.json:
        args.json.write_text(json.dumps({f"{'/'.join(map(str, c))}/{p}": v for (c, p), v in got.items()}, indent=2) + "\n")


def _embprof_dir() -> Path:
    """The embprof package ``python -m embprof`` runs here (located, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("embprof")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bench_breakdown: embprof is not importable here (run from the project's venv)")
    return Path(next(iter(spec.submodule_search_locations)))


def precompile(packages: list[Path]) -> None:
    """Bytecode for every module of ``packages``, written even under ``PYTHONDONTWRITEBYTECODE``."""
    import compileall

    for package in packages:
        if not compileall.compile_dir(str(package), quiet=1):
            raise SystemExit(f"bench_breakdown: {package} does not compile")


def _baseline(args) -> list[str] | None:
    """The interpreter (and, for another commit's src/, the environment) the baseline runs with."""
    if args.baseline_src:
        return ["/usr/bin/env", f"PYTHONPATH={args.baseline_src.resolve()}", args.baseline_python or sys.executable]
    return [args.baseline_python] if args.baseline_python else None


def report(got: dict, cases: list, loads: list[float], args) -> None:
    print(f"load average (1 min) at each round: {', '.join(f'{x:.1f}' for x in loads)} on {os.cpu_count()} CPUs; "
          f"{args.repeat} rounds, min / median")
    print(f"{'names':<6}{'kernels':>9}{'iters':>7}  {'program':<9}{'CPU s':>15}{'wall s':>15}{'peak RSS MB':>13}")
    for case in cases:
        for prog in ("ours", "baseline", "floor", "nsys-ai"):
            m = got.get((case, prog))
            if m:
                print(f"{case[0]:<6}{kernels(case):>9,}{case[1]:>7}  {prog:<9}"
                      f"{m['cpu_min']:>7.2f} /{m['cpu_median']:>6.2f}{m['wall_min']:>7.2f} /{m['wall_median']:>6.2f}"
                      f"{m['rss_mb']:>13.0f}")
    print()

    def ratio(a: dict, b: dict, key: str) -> float:
        return a[f"{key}_min"] / b[f"{key}_min"]

    sizes = sorted({c[1] for c in cases if c[1] != args.big and len(c) == 2})
    for names in sorted({c[0] for c in cases if len(c) == 2 and c[1] in sizes}):
        for s in sizes:
            ours, floor = got.get(((names, s), "ours")), got.get(((names, s), "floor"))
            if ours and floor and s >= 100:
                print(f"{names} names, {kernels((names, s)):,} kernels: ours / floor {ratio(ours, floor, 'cpu'):.2f}x CPU"
                      f" (target <= 1.5x), {ratio(ours, floor, 'wall'):.2f}x wall; peak RSS {ours['rss_mb']:.0f} MB"
                      f" (target <= {400 if s <= 100 else 1200} MB)")
        lo, hi = min(sizes), max(sizes)
        o_lo, o_hi = got.get(((names, lo), "ours")), got.get(((names, hi), "ours"))
        f_lo, f_hi = got.get(((names, lo), "floor")), got.get(((names, hi), "floor"))
        if lo != hi and o_lo and o_hi and f_lo and f_hi:
            ours_growth, floor_growth = ratio(o_hi, o_lo, "cpu"), ratio(f_hi, f_lo, "cpu")
            print(f"{names} names, {kernels((names, lo)):,} -> {kernels((names, hi)):,} kernels: ours grows "
                  f"{ours_growth:.1f}x, the floor {floor_growth:.1f}x in CPU time: {ours_growth / floor_growth:.2f}x"
                  " the floor's growth (target <= 1.3x)")
    for case in cases:
        ours, base, floor = got.get((case, "ours")), got.get((case, "baseline")), got.get((case, "floor"))
        if ours and base and floor:
            print(f"{case[0]} names, {kernels(case):,} kernels: baseline / floor {ratio(base, floor, 'cpu'):.2f}x CPU,"
                  f" peak RSS {base['rss_mb']:.0f} MB; baseline / ours {ratio(base, ours, 'cpu'):.2f}x CPU")
    for s in sorted({c[1] for c in cases if len(c) == 2}):
        ours, theirs = got.get((("many", s), "ours")), got.get((("many", s), "nsys-ai"))
        if ours and theirs:
            print(f"nsys-ai / ours at {kernels(('many', s)):,} kernels: {ratio(theirs, ours, 'cpu'):.1f}x CPU, "
                  f"{ratio(theirs, ours, 'wall'):.1f}x wall (target >= 5x at 4M)")
    if args.big:
        ours, floor = got.get((("many", args.big), "ours")), got.get((("many", args.big), "floor"))
        if ours and floor:
            print(f"many names, {kernels(('many', args.big)):,} kernels: ours / floor {ratio(ours, floor, 'cpu'):.2f}x CPU"
                  f" (target <= 1.5x), peak RSS {ours['rss_mb']:.0f} MB against the floor's {floor['rss_mb']:.0f} MB")
    if args.long:
        case = ("many", args.long, "long")
        ours, floor, base = got.get((case, "ours")), got.get((case, "floor")), got.get((case, "baseline"))
        for name, m in (("ours", ours), ("baseline", base)):
            if m and floor:
                low, mid = round_ratios(m, floor)
                print(f"long shape, {args.long:,} iterations ({kernels(case):,} work items): {name} / floor "
                      f"{ratio(m, floor, 'cpu'):.2f}x CPU (min / min), {m['cpu_median'] / floor['cpu_median']:.2f}x "
                      f"(median / median), per round {low:.2f}x min, {mid:.2f}x median (target <= 1.5x), "
                      f"peak RSS {m['rss_mb']:.0f} MB (target <= 400 MB)")


if __name__ == "__main__":
    main()
