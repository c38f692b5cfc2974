"""How often does the comparison call two runs of unchanged code a change, and does it catch 2x?

Runs the benchmark suite's two tiny configs (the e2e tests' ``_sgd_gpu_`` and
``_sgd_no_hbm_``, two iterations a pass) ``--runs`` times, one process each, as
the workflow's timing step does, with ``--repeats`` passes; runs of several
checkouts (``--suite-root``, e.g. a clone at an older commit) are interleaved
so that they share the machine's drift. Then, for the first 5, 7 and 10
repeats of every record and two noise measures (the interquartile range and
the full range, over the median), it counts

- the pairs of runs in which any of the 8 config metrics is called a change
  (Mann-Whitney p < 0.05 and |delta| above the noise): false alarms, since
  the code is the same;
- of those pairs, the ones in which TBE (the same code in both runs) changed in every
  config that changed: where ``embprof diff`` names the machine as the cause
  (docs/COMPARE.md, "Warnings");
- the configs that a copy with every repeat doubled is caught on (any metric).

    python benchmarks/bench_compare_noise.py [--runs 12] [--repeats 10] [--suite-root DIR ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from embprof.stats import ALPHA, mann_whitney_p

ROOT = Path(__file__).resolve().parents[1]
SUITE = "suite/benchmark_batched_dynamicemb_tables.py"
LABELS = ("_sgd_gpu_", "_sgd_no_hbm_")
METRICS = ("dyn_train_ms", "dyn_eval_ms", "trc_train_ms", "trc_eval_ms")


def spread(values: np.ndarray, measure: str) -> float:
    median = float(np.median(values))
    if measure == "iqr":
        q25, q75 = np.percentile(values, [25, 75])
        return 100.0 * (q75 - q25) / median
    return 100.0 * (values.max() - values.min()) / median


def changed(a: np.ndarray, b: np.ndarray, measure: str) -> bool:
    p = mann_whitney_p(a[None, :], b[None, :])[0]
    delta = 100.0 * abs(np.median(b) / np.median(a) - 1.0)
    return bool(p < ALPHA and delta > max(spread(a, measure), spread(b, measure)))


def pair_verdict(a: list[dict], b: list[dict], n: int, measure: str) -> tuple[bool, bool]:
    """(any config metric changed, every changed config's TBE changed too) for two runs."""
    configs = [{m: changed(samples(ra, m, n), samples(rb, m, n), measure) for m in METRICS} for ra, rb in zip(a, b, strict=True)]
    moved = [c for c in configs if any(c.values())]
    return bool(moved), bool(moved) and all(c["trc_train_ms"] or c["trc_eval_ms"] for c in moved)


def run_once(root: Path, out: Path, repeats: int) -> list[dict]:
    for label in LABELS:
        subprocess.run(
            [sys.executable, "-m", "pytest", SUITE, "-q", "-p", "no:cacheprovider", "-o", "timeout=0",
             "--preset", "smoke", "--label", label, "--num-iterations", "2", "--repeats", str(repeats),
             "--results-file", str(out)],
            cwd=root, env={**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"},
            capture_output=True, check=True,
        )
    return sorted(json.loads(out.read_text()), key=lambda r: r["label"])


def samples(record: dict, metric: str, n: int) -> np.ndarray:
    return np.asarray(record["timings"][metric]["repeats"][:n], dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--suite-root", type=Path, action="append", help="checkouts to compare (default: this one)")
    args = parser.parse_args()
    roots = args.suite_root or [ROOT]
    runs: dict[Path, list[list[dict]]] = {root: [] for root in roots}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for k, root in enumerate(roots):  # interleaved: every checkout sees the same drift
                runs[root].append(run_once(root, Path(tmp, f"{k}_{i}.json"), args.repeats))
    print(f"{args.runs} runs per checkout, interleaved; 2 configs x 4 metrics; alpha {ALPHA}")
    print(f"{'checkout':<34} {'timer':<10} {'n':>3} {'noise':<6} {'run pairs called changed':>26} "
          f"{'of them, TBE moved':>18} {'2x configs caught':>19}")
    for root, results in runs.items():
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        timer = results[0][0].get("timer", "wall_clock")
        pairs = list(itertools.combinations(results, 2))
        for n in (5, 7, min(10, args.repeats)):
            for measure in ("iqr", "range"):
                verdicts = [pair_verdict(a, b, n, measure) for a, b in pairs]
                false = sum(v for v, _ in verdicts)
                machine = sum(m for _, m in verdicts)
                caught = sum(
                    any(changed(samples(r, m, n), 2.0 * samples(r, m, n), measure) for m in METRICS)
                    for run in results for r in run
                )
                configs = sum(len(run) for run in results)
                print(f"{commit + ' ' + str(root)[-24:]:<34} {timer:<10} {n:>3} {measure:<6} "
                      f"{false:>10} / {len(pairs):<3} ({100 * false / len(pairs):4.1f}%) {machine:>18} {caught:>9} / {configs:<3}")


if __name__ == "__main__":
    main()
