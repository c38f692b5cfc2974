"""Write every measured figure the docs quote from the committed files that hold it.

A figure in a Markdown page sits between two markers that name the table and the
files it comes from:

    <!-- generated: suite-ratios after=examples/records/storage_engine/suite_1f4fbf8.json -->
    ...table written by this command...
    <!-- /generated -->

``python tools/docs_figures.py`` rewrites every such block of the pages below the
repository root; ``--check`` rewrites nothing and exits 1, naming each block that
disagrees with its files (the test suite runs it). A figure is never typed by hand.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The checkout's root: the suite (suite/, not installed; the EmbeddingCollection comparison table)
# imports from it. embprof is the installed package (pip install -e .).
sys.path.insert(0, str(ROOT))

from embprof.labels import parse_label  # noqa: E402
from embprof.results.busy import read_busy  # noqa: E402
from embprof.results.records import read_records  # noqa: E402

PAGES = ("README.md", "docs/*.md", "benchmarks/README.md", "examples/*/README.md", "examples/*/*/README.md")
BLOCK = re.compile(r"(<!-- generated: (?P<spec>[^>]*?) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.S)
REFERENCE = "examples/reference/dynamicemb_h100_benchmark_results.json"
SUITE_ORDER = ("no_caching", "no_hbm", "gpu", "caching")
SUITE_NAMES = {"gpu": "gpu", "caching": "caching", "no_caching": "no_caching", "no_hbm": "no_hbm"}


class FigureError(Exception):
    """A marker that names no known table, or files that do not hold what the table needs."""


def _table(header: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    rule = ["---" if i < numeric_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _ms(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ratio(dyn: float | None, tbe: float | None) -> str:
    return "—" if not dyn or not tbe else f"{dyn / tbe:.2f}x"


def _config_key(record: dict) -> tuple[str, str, float | None]:
    fields = parse_label(record["label"])
    return fields.mode, fields.optimizer, fields.cache_footprint_ratio


def _config_name(key: tuple[str, str, float | None]) -> str:
    mode, optimizer, cfr = key
    return f"{SUITE_NAMES[mode]}{f' cfr {cfr}' if cfr is not None else ''} {optimizer}"


def _records(path: str) -> dict[tuple, dict]:
    try:
        records = read_records(ROOT / path)
    except Exception as error:  # noqa: BLE001 - any unreadable file is one line for the writer of the docs
        raise FigureError(f"{path}: {error}") from None
    return {_config_key(r): r for r in records}


def _ordered(keys) -> list[tuple]:
    return sorted(keys, key=lambda k: (SUITE_ORDER.index(k[0]), k[2] or 0, k[1]))


def _busy_ms(opcalls: str, label: str) -> dict[str, float]:
    """GPU-busy ms per iteration per backend of one config's profile (its busy sidecar); {} if it has none."""
    path = ROOT / opcalls / f"opcalls__{label}.busy.json"
    if not path.exists():
        return {}
    try:
        return read_busy(path).ms_per_iter
    except (OSError, KeyError, ValueError) as error:
        raise FigureError(f"{path}: {error}") from None


def _timed_nv(records: dict, phase: str) -> bool:
    """Whether any record of a run times NVIDIA's dynamicemb in ``phase``: its columns show only then."""
    return any(r.get(f"nv_{phase}_ms") for r in records.values())


def _backend_cells(record: dict, phase: str, nv: bool) -> list[str]:
    """A record's ``phase`` ms of dyn and TBE and their ratio; with ``nv``, NVIDIA's ms and dyn / NVIDIA."""
    dyn, trc = record.get(f"dyn_{phase}_ms"), record.get(f"trc_{phase}_ms")
    cells = [_ms(dyn), _ms(trc), _ratio(dyn, trc)]
    return cells + ([_ms(record.get(f"nv_{phase}_ms")), _ratio(dyn, record.get(f"nv_{phase}_ms"))] if nv else [])


def suite_ratios(after: str, before: str | None = None, reference: str = REFERENCE, busy: str | None = None) -> str:
    """Train ms dyn / TBE per config of a suite run (and dyn / NVIDIA's dynamicemb where the run timed it),
    beside an earlier run and the reference system's records; ``busy``: the run's opcalls/ folder, for each
    backend's GPU-busy ms in the profile."""
    now, earlier, ref = _records(after), _records(before) if before else {}, _records(reference)
    nv = _timed_nv(now, "train")
    header = (["config"] + (["before: dyn / TBE"] if before else []) + ["dyn ms", "TBE ms", "dyn / TBE"]
              + (["NVIDIA ms", "dyn / NVIDIA"] if nv else [])
              + (["dyn GPU-busy ms", "TBE GPU-busy ms"] if busy else []) + ["reference (H100)"])
    rows = []
    for key in _ordered(now):
        record = now[key]
        row = [_config_name(key)]
        if before:
            old = earlier.get(key, {})
            row.append(_ratio(old.get("dyn_train_ms"), old.get("trc_train_ms")))
        row += _backend_cells(record, "train", nv)
        if busy:
            gpu = _busy_ms(busy, record["label"])
            row += [_ms(gpu.get("dyn")), _ms(gpu.get("trc"))]
        row.append(_ratio(ref.get(key, {}).get("dyn_train_ms"), ref.get(key, {}).get("trc_train_ms")))
        rows.append(row)
    return _table(header, rows)


def suite_eval(after: str, reference: str = REFERENCE) -> str:
    """Eval ms dyn / TBE per config (and dyn / NVIDIA's dynamicemb where the run timed it), beside the
    reference system's."""
    now, ref = _records(after), _records(reference)
    nv = _timed_nv(now, "eval")
    rows = [[_config_name(key), *_backend_cells(now[key], "eval", nv),
             _ratio(ref.get(key, {}).get("dyn_eval_ms"), ref.get(key, {}).get("trc_eval_ms"))]
            for key in _ordered(now)]
    header = (["config", "dyn eval ms", "TBE eval ms", "dyn / TBE"] + (["NVIDIA eval ms", "dyn / NVIDIA"] if nv else [])
              + ["reference (H100)"])
    return _table(header, rows)


def _bench(path: str) -> dict:
    try:
        return json.loads((ROOT / path).read_text())
    except (OSError, ValueError) as error:
        raise FigureError(f"{path}: {error}") from None


def _step_ms(result: dict, backend: str) -> float | None:
    """A ``bench_tables.py`` result's train ms per step (forward + backward) of ``backend``; None if it did not run."""
    forward = result[f"{backend}_forward_ms"]
    return None if forward is None else forward + result[f"{backend}_backward_ms"]


def bench_tables(file: str) -> str:
    """``benchmarks/bench_tables.py``'s record: ms per phase, the train ratio, the first pass."""
    rows = []
    for r in _bench(file)["results"]:
        dyn, tbe = _step_ms(r, "dyn"), _step_ms(r, "tbe")
        rows.append([r["config"], *(_ms(r[k], 3) for k in ("dyn_forward_ms", "dyn_backward_ms", "tbe_forward_ms", "tbe_backward_ms")),
                     _ratio(dyn, tbe), _ms(r["dyn_first_pass_ms"], 3), _ms(r["tbe_first_pass_ms"], 3),
                     _ratio(r["dyn_first_pass_ms"], r["tbe_first_pass_ms"])])
    return _table(["config", "dyn fwd", "dyn bwd", "TBE fwd", "TBE bwd", "train x", "dyn 1st", "TBE 1st", "1st x"], rows)


def bench_runs(files: str) -> str:
    """Several runs of ``bench_tables.py`` (comma-separated records): per config, dyn / TBE of train and of
    the first pass, each ratio taken within one run, as min and median over the runs."""
    ratios: dict[str, dict[str, list[float]]] = {}
    for path in files.split(","):
        for r in _bench(path)["results"]:
            tbe = _step_ms(r, "tbe")
            if tbe is None:
                raise FigureError(f"{path}: {r['config']} has no TBE timing")
            config = ratios.setdefault(r["config"], {"train": [], "first": []})
            config["train"].append(_step_ms(r, "dyn") / tbe)
            config["first"].append(r["dyn_first_pass_ms"] / r["tbe_first_pass_ms"])
    rows = [[name, str(len(r["train"])), *(f"{f(r[k]):.2f}x" for k in ("train", "first") for f in (min, statistics.median))]
            for name, r in ratios.items()]
    return _table(["config", "runs", "train x min", "train x median", "1st x min", "1st x median"], rows)


def suite_backends(files: str, phase: str = "train") -> str:
    """Several runs of the suite with the three backends (comma-separated records files, one run each):
    per config, ours / TBE, NVIDIA's dynamicemb / TBE and ours / NVIDIA's in ``phase`` ms (train or eval),
    each ratio taken within one run, as min and median over the runs (a config where a backend did not run: —)."""
    if phase not in ("train", "eval"):
        raise FigureError(f"suite-backends: phase must be train or eval, not {phase!r}")
    ratios: dict[tuple, dict[str, list[float]]] = {}
    for path in files.split(","):
        for key, r in _records(path).items():
            config = ratios.setdefault(key, {"dyn": [], "nv": [], "dyn_nv": []})
            dyn, trc, nv = (r.get(f"{b}_{phase}_ms") for b in ("dyn", "trc", "nv"))
            for name, (a, b) in (("dyn", (dyn, trc)), ("nv", (nv, trc)), ("dyn_nv", (dyn, nv))):
                if a and b:
                    config[name].append(a / b)

    def spread(values: list[float]) -> list[str]:
        return [f"{min(values):.2f}x", f"{statistics.median(values):.2f}x"] if values else ["—", "—"]

    rows = [[_config_name(key), str(max(len(v) for v in ratios[key].values())),
             *spread(ratios[key]["dyn"]), *spread(ratios[key]["nv"]), *spread(ratios[key]["dyn_nv"])]
            for key in _ordered(ratios)]
    header = ["config", "runs", "ours / TBE min", "median", "NVIDIA / TBE min", "median", "ours / NVIDIA min", "median"]
    return _table(header, rows)


def host_traffic(file: str) -> str:
    """Host-row bytes per training step over its time, against the pinned copy peaks the same run measured."""
    data = _bench(file)
    peaks = data.get("copy_peaks")
    if not peaks:
        raise FigureError(f"{file}: no copy_peaks (a CPU run?)")
    rows = []
    for r in data["results"]:
        if "host_read_bytes_per_iter" not in r:
            continue
        train = r["dyn_forward_ms"] + r["dyn_backward_ms"]
        read, written = r["host_read_bytes_per_iter"], r["host_written_bytes_per_iter"]
        rows.append([r["config"], f"{read / 1e6:.1f}", f"{written / 1e6:.1f}", _ms(train, 3), f"{read / (train * 1e6):.1f}",
                     f"{written / (train * 1e6):.1f}", f"{read / (train * 1e6) / peaks['h2d_gbps']:.0%}", _ms(read / (peaks["h2d_gbps"] * 1e6), 1)])
    header = ["config", "read MB", "written MB", "train ms", "read GB/s", "written GB/s", "read / H2D peak", "ms at the peak"]
    note = f"Pinned copy peaks of the same run: host-to-device {peaks['h2d_gbps']:.1f} GB/s, device-to-host {peaks['d2h_gbps']:.1f} GB/s.\n\n"
    return note + _table(header, rows)


def _op_ms(path: Path) -> dict[tuple[str, str], float]:
    totals: dict[tuple[str, str], float] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["backend"] == "dyn":
                key = (row["phase"], row["op"])
                totals[key] = totals.get(key, 0.0) + float(row["avg_ms_per_iter"])
    return totals


def per_op(before: str, after: str, label: str, floor: str = "0.01") -> str:
    """dyn's GPU ms per iteration per (phase, op) of one config in two breakdowns, with both backends' GPU-busy."""
    name = f"opcalls__{label}"
    try:
        old, new = _op_ms(ROOT / before / f"{name}.csv"), _op_ms(ROOT / after / f"{name}.csv")
        busy_old, busy_new = read_busy(ROOT / before / f"{name}.busy.json"), read_busy(ROOT / after / f"{name}.busy.json")
    except (OSError, KeyError, ValueError) as error:
        raise FigureError(f"{label}: {error}") from None
    keys = sorted(set(old) | set(new), key=lambda k: -(old.get(k, 0.0) + new.get(k, 0.0)))
    rows = [[phase, op, _ms(old.get((phase, op)), 3), _ms(new.get((phase, op)), 3)] for phase, op in keys
            if old.get((phase, op), 0.0) + new.get((phase, op), 0.0) >= float(floor)]
    rows.append(["all", "dyn GPU busy", _ms(busy_old.ms_per_iter["dyn"], 3), _ms(busy_new.ms_per_iter["dyn"], 3)])
    rows.append(["all", "TBE GPU busy", _ms(busy_old.ms_per_iter["trc"], 3), _ms(busy_new.ms_per_iter["trc"], 3)])
    return _table(["phase", "op", "before", "after"], rows, numeric_from=2)


def crosscheck(dir: str) -> str:  # noqa: A002 - the marker's word
    """Per config of an example: its ops, the largest difference of any op's ms from Nsight Systems'
    nvtx_kern_sum and NVIDIA's nsys_breakdown.py on the same trace (embprof.report.crosscheck), and
    the dyn ms per iteration of the backward's ops (the ones launched on PyTorch's autograd thread)."""
    from embprof.report.crosscheck import crosscheck as compare
    from embprof.results.opcalls import read_opcalls
    from embprof.results.run import Run

    try:
        table = compare(ROOT / dir, Run.from_folder(ROOT / dir).opcalls)
    except Exception as error:  # noqa: BLE001 - any unreadable file is one line for the writer of the docs
        raise FigureError(f"{dir}: {error}") from None
    if table.empty:
        raise FigureError(f"{dir}: no config with both tools' breakdowns in crosscheck/")
    records = _records(f"{dir}/benchmark_results.json")
    labels = {r["label"]: key for key, r in records.items()}
    rows = []
    for key in _ordered({labels[label] for label in set(table["label"])}):
        label = records[key]["label"]
        part = table[table["label"] == label]
        ops = read_opcalls(ROOT / dir / "opcalls" / f"opcalls__{label}.csv")
        backward = ops[(ops["backend"] == "dyn") & (ops["phase"] == "backward")]["avg_ms_per_iter"].sum()
        rows.append([_config_name(key), str(len(part)), f"{int(part['agrees'].sum())}",
                     f"{part['max_rel_diff'].max():.4%}", _ms(backward, 3), _ms(_busy_ms(f"{dir}/opcalls", label).get("dyn"), 3)])
    return _table(["config", "ops", "agree within 0.5%", "largest difference", "dyn backward ms", "dyn GPU-busy ms"], rows)


def example_run(dir: str) -> str:  # noqa: A002 - the marker's word
    """One line: where and when an example's files were measured, from its environment.json (and the
    records' provenance)."""
    from embprof.results.environment import read_environment
    from embprof.results.provenance import read_provenance

    try:
        env = read_environment(ROOT / dir / "environment.json")
    except Exception as error:  # noqa: BLE001 - any unreadable file is one line for the writer of the docs
        raise FigureError(f"{dir}: {error}") from None
    provenance = read_provenance(env)
    commit = provenance["git_commit"]
    at = f"commit `{commit[:7]}`" + (" (with uncommitted changes)" if provenance["git_dirty"] else "") if commit else "a commit not recorded"
    return (f"Measured at {at} on one {env.get('gpu_name') or env.get('device')} (driver {env.get('driver')}, "
            f"torch {env.get('torch')}, fbgemm-gpu {env.get('fbgemm_gpu')}), profiled with {env.get('profiler')}, "
            f"{str(env.get('date', ''))[:10]}.\n")


def ec_results(file: str) -> str:
    """The EmbeddingCollection benchmark's records: TorchRec against dynamic tables per dedup setting
    (the benchmark's own comparison table, ``suite.embedding_collection.compare``)."""
    from suite.embedding_collection.compare import table

    try:
        records = [r for r in read_records(ROOT / file) if r.get("benchmark") == "embedding_collection"]
    except Exception as error:  # noqa: BLE001 - any unreadable file is one line for the writer of the docs
        raise FigureError(f"{file}: {error}") from None
    if not records:
        raise FigureError(f"{file}: no embedding_collection records")
    return table(records) + "\n"


def db_schema() -> str:
    """The results database's tables, views and columns: ``embprof db schema`` of a new database
    (what ``embprof db write`` makes), read from SQLite's catalogue and the file's own docs."""
    from embprof.results.database.describe import empty_schema_markdown

    return empty_schema_markdown()


TABLES: dict[str, Callable[..., str]] = {
    "db-schema": db_schema,
    "ec-results": ec_results,
    "example-run": example_run,
    "suite-ratios": suite_ratios,
    "suite-eval": suite_eval,
    "bench-tables": bench_tables,
    "bench-runs": bench_runs,
    "suite-backends": suite_backends,
    "host-traffic": host_traffic,
    "per-op": per_op,
    "crosscheck": crosscheck,
}


def render(spec: str) -> str:
    name, *pairs = spec.split()
    if name not in TABLES:
        raise FigureError(f"unknown table {name!r} (known: {', '.join(TABLES)})")
    try:
        arguments = dict(pair.split("=", 1) for pair in pairs)
        return TABLES[name](**arguments)
    except TypeError as error:
        raise FigureError(f"{name}: {error}") from None


def rewrite(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("spec")) + m.group(4), text)


def pages(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern)})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each page whose figures disagree with their files")
    args = parser.parse_args(argv)
    stale = []
    try:
        for page in pages():
            text = page.read_text()
            new = rewrite(text)
            if new != text:
                stale.append(page.relative_to(ROOT))
                if not args.check:
                    page.write_text(new)
    except FigureError as error:
        print(f"docs_figures: {error}", file=sys.stderr)
        return 1
    if args.check and stale:
        print(f"docs_figures: figures disagree with their files in {', '.join(map(str, stale))}; run python tools/docs_figures.py", file=sys.stderr)
        return 1
    for page in stale:
        print(f"docs_figures: rewrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
