"""The breakdown of two source trees on the same traces, every output file compared byte for byte.

    python benchmarks/diff_breakdown.py OLD_SRC NEW_SRC WORKDIR [TRACE[@LAYOUT[@CHUNK]]...] [--random N [--seed S]]

For a change that must not move a number (a faster sweep, a new data structure):
``OLD_SRC`` is another commit's ``src/`` (``git archive REV src | tar -x -C /tmp/old``),
``NEW_SRC`` this checkout's. Each trace is broken down by each tree in a process of
its own (``run_breakdown`` and ``write_outputs``: the command's files, plus each
label's dropped counts), in layout ``default`` or ``any`` and in chunks of ``CHUNK``
rows (``none``: whole tables; default: the command's), so small exports cross
chunk edges too. ``--random N`` adds N random exports of
``tests/test_breakdown_properties.build`` (random nesting, bare threads that borrow
their context, copies, memsets, graphs), each run in both layouts and three chunk
sizes. A refused trace compares its one-line error. Exits 1 when any output differs.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = r"""
import sys
from pathlib import Path
from embprof.trace import run_breakdown, write_outputs
from embprof.trace.calls import CollidingCalls
from embprof.errors import TraceError
out = Path(sys.argv[1])
for spec in sys.argv[2:]:
    name, path, layout, chunk = spec.split("@")
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    kw = {} if chunk == "default" else {"chunk_rows": None if chunk == "none" else int(chunk)}
    try:
        res = run_breakdown([Path(path)], layout, **kw)
    except (TraceError, CollidingCalls) as exc:
        (d / "ERROR").write_text(str(exc) + "\n")
        continue
    write_outputs(res, d)
    for label, lb in sorted(res.items()):
        (d / f"dropped__{label}.txt").write_text(f"{lb.dropped_unlaunched} {lb.dropped_ambiguous}\n")
"""


def _random_traces(work: Path, n: int, seed: int) -> list[str]:
    sys.path.insert(0, str(HERE.parent / "tests"))  # the property tests' trace builder: a test module, not a package
    import numpy as np
    from test_breakdown_properties import build

    rng = np.random.default_rng(seed)
    specs = []
    for i in range(n):
        path = work / f"random{i}.sqlite"
        build(path, int(rng.integers(0, 2**32 - 1)), int(rng.integers(1, 6)), int(rng.integers(1, 120)),
              float(rng.choice([0.5, 0.7, 0.95, 1.0])), in_start_order=bool(rng.integers(0, 2)))
        specs += [f"{path}@{layout}@{chunk}" for layout in ("default", "any") for chunk in ("none", "7", "default")]
    return specs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old_src", type=Path)
    ap.add_argument("new_src", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("traces", nargs="*", help="TRACE[@default|any[@CHUNK|none]]")
    ap.add_argument("--random", type=int, default=0, help="random exports to add")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    specs = [(t.split("@") + ["default", "default"])[:3] for t in args.traces]
    if args.random:
        specs += [s.split("@") for s in _random_traces(args.workdir, args.random, args.seed)]
    runs = [f"{i}_{Path(p).name}_{layout}_{chunk}@{p}@{layout}@{chunk}" for i, (p, layout, chunk) in enumerate(specs)]
    for tag, src in (("old", args.old_src), ("new", args.new_src)):
        subprocess.run(["rm", "-rf", str(args.workdir / tag)], check=True)
        env = dict(os.environ, PYTHONPATH=str(src.resolve()))
        subprocess.run([sys.executable, "-c", CHILD, str(args.workdir / tag), *runs], env=env, check=True)
    differ = []
    for run in runs:
        name = run.split("@")[0]
        old, new = args.workdir / "old" / name, args.workdir / "new" / name
        files = sorted(p.name for p in old.iterdir())
        if files != sorted(p.name for p in new.iterdir()) or not all(
                filecmp.cmp(old / f, new / f, shallow=False) for f in files):
            differ.append(name)
    refused = sum((args.workdir / "new" / r.split("@")[0] / "ERROR").exists() for r in runs)
    print(f"{len(runs)} runs ({refused} refused): {len(differ)} differ")
    for name in differ:
        print(f"  differs: {name}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
