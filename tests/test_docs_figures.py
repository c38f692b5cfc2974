"""The docs' measured figures are the committed files' figures: tools/docs_figures.py --check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "docs_figures.py"


def _tool():
    return load_script("tools/docs_figures.py")


def test_every_generated_figure_agrees_with_its_files() -> None:
    done = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_changed_record_changes_the_figure_and_fails_the_check(tmp_path: Path) -> None:
    tool = _tool()
    source = ROOT / "examples/records/storage_engine/suite_1f4fbf8.json"
    records = json.loads(source.read_text())
    page = f"<!-- generated: suite-ratios after={tmp_path / 'suite.json'} -->\n<!-- /generated -->\n"
    (tmp_path / "suite.json").write_text(json.dumps(records))
    written = tool.rewrite(page)
    assert "| gpu sgd | 1.72 | 0.86 | 1.99x | 2.01x |" in written
    assert tool.rewrite(written) == written, "a page just written agrees with its files"
    sgd_gpu = next(r for r in records if r["label"].endswith("_sgd_gpu_pool=none_cap=1638K"))
    sgd_gpu["dyn_train_ms"] *= 2
    (tmp_path / "suite.json").write_text(json.dumps(records))
    rewritten = tool.rewrite(written)
    assert rewritten != written and "| gpu sgd | 3.44 | 0.86 | 3.97x | 2.01x |" in rewritten


@pytest.mark.parametrize(
    ("spec", "message"),
    [("nope file=x", "unknown table 'nope'"), ("bench-tables", "bench-tables"), ("suite-ratios after=/nonexistent.json", "/nonexistent.json")],
)
def test_a_bad_marker_is_one_error_line(spec: str, message: str) -> None:
    tool = _tool()
    with pytest.raises(tool.FigureError, match=message):
        tool.rewrite(f"<!-- generated: {spec} -->\n<!-- /generated -->\n")


def test_busy_columns_come_from_the_profiles_sidecars() -> None:
    """GPU-busy per backend from each config's busy sidecar; a config without a profile shows —."""
    tool = _tool()
    folder = "examples/records/storage_engine"
    table = tool.suite_ratios(after=f"{folder}/suite_1f4fbf8.json", busy=f"{folder}/opcalls_1f4fbf8")
    label = "T10_totalB1048570_D128_sgd_no_caching_pool=none_cap=1638K"
    busy = json.loads((ROOT / folder / "opcalls_1f4fbf8" / f"opcalls__{label}.busy.json").read_text())["busy_ms_per_iter"]
    row = next(line for line in table.splitlines() if line.startswith("| no_caching sgd |"))
    assert f"| {busy['dyn']:.2f} | {busy['trc']:.2f} |" in row
    assert "| 1.99x | — | — |" in next(line for line in table.splitlines() if line.startswith("| gpu sgd |"))


def test_repeated_bench_runs_give_min_and_median_of_each_runs_ratio(tmp_path: Path) -> None:
    tool = _tool()

    def run(dyn_step: float, dyn_first: float) -> dict:
        result = dict(config="sgd-gpu", dyn_forward_ms=dyn_step / 2, dyn_backward_ms=dyn_step / 2, tbe_forward_ms=0.5,
                      tbe_backward_ms=0.5, dyn_first_pass_ms=dyn_first, tbe_first_pass_ms=1.0)
        return {"results": [result]}

    paths = []
    for i, (step, first) in enumerate([(0.8, 1.5), (1.4, 1.4), (0.7, 2.0)]):
        paths.append(tmp_path / f"run{i}.json")
        paths[-1].write_text(json.dumps(run(step, first)))
    table = tool.bench_runs(files=",".join(map(str, paths)))
    assert "| sgd-gpu | 3 | 0.70x | 0.80x | 1.40x | 1.50x |" in table
    no_tbe = run(1.0, 1.0)
    no_tbe["results"][0]["tbe_forward_ms"] = None
    (tmp_path / "dyn_only.json").write_text(json.dumps(no_tbe))
    with pytest.raises(tool.FigureError, match="has no TBE timing"):
        tool.bench_runs(files=str(tmp_path / "dyn_only.json"))


def test_nvidias_columns_show_where_the_run_timed_it(tmp_path: Path) -> None:
    """The headline tables gain NVIDIA's ms and ours / NVIDIA's only for a run that timed NVIDIA's library."""
    tool = _tool()
    label = "T10_totalB1048570_D128_sgd_gpu_pool=none_cap=1638K"
    record = {"label": label, "dyn_train_ms": 1.0, "trc_train_ms": 2.0, "dyn_eval_ms": 0.3, "trc_eval_ms": 0.6}
    (tmp_path / "two.json").write_text(json.dumps([record]))
    (tmp_path / "three.json").write_text(json.dumps([{**record, "nv_train_ms": 4.0, "nv_eval_ms": 0.2}]))
    assert "NVIDIA" not in tool.suite_ratios(after=str(tmp_path / "two.json"))
    assert "NVIDIA" not in tool.suite_eval(after=str(tmp_path / "two.json"))
    assert "| gpu sgd | 1.00 | 2.00 | 0.50x | 4.00 | 0.25x | 2.01x |" in tool.suite_ratios(after=str(tmp_path / "three.json"))
    assert "| gpu sgd | 0.30 | 0.60 | 0.50x | 0.20 | 1.50x | 1.54x |" in tool.suite_eval(after=str(tmp_path / "three.json"))


def test_three_backends_over_runs_take_each_ratio_within_one_run(tmp_path: Path) -> None:
    """ours / TBE, NVIDIA / TBE and ours / NVIDIA per config: min and median of the ratios of each run,
    never a ratio of two runs' times; a backend that did not run is a dash."""
    tool = _tool()
    label = "T10_totalB1048570_D128_sgd_gpu_pool=none_cap=1638K"
    adam = "T10_totalB1048570_D128_adam_gpu_pool=none_cap=1638K"
    runs = [(1.0, 2.0, 4.0), (3.0, 2.0, 2.0), (2.0, 4.0, 8.0)]  # dyn, trc, nv train ms
    files = []
    for k, (dyn, trc, nv) in enumerate(runs):
        path = tmp_path / f"run{k}.json"
        eval_ms = {"dyn_eval_ms": 0.5, "trc_eval_ms": 1.0, "nv_eval_ms": 1.0}
        path.write_text(json.dumps([{"label": label, "dyn_train_ms": dyn, "trc_train_ms": trc, "nv_train_ms": nv, **eval_ms},
                                    {"label": adam, "dyn_train_ms": dyn, "trc_train_ms": trc, "nv_train_ms": None}]))
        files.append(str(path))
    table = tool.suite_backends(",".join(files))
    assert "| gpu sgd | 3 | 0.50x | 0.50x | 1.00x | 2.00x | 0.25x | 0.25x |" in table
    assert "| gpu adam | 3 | 0.50x | 0.50x | — | — | — | — |" in table
    assert "| gpu sgd | 3 | 0.50x | 0.50x | 1.00x | 1.00x | 0.50x | 0.50x |" in tool.suite_backends(",".join(files), phase="eval")
    with pytest.raises(tool.FigureError, match="phase must be train or eval"):
        tool.suite_backends(files[0], phase="forward")
