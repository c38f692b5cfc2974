"""Text from a trace, a log or the environment in the Markdown outputs (``summary.md``, ``embprof
diff --format markdown``): shown as the characters it is, never as HTML, a broken table or a code
block that ends early (issue 34, case 8)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
from report_inputs import LABELS, write_results

from embprof.cli import main
from embprof.pages.cells import Cells
from embprof.report import environment, markdown

SCRIPT = "<script>alert(1)</script>"
HOSTILE = f"{SCRIPT} | *bold* [link](javascript:x) `tick` _under_ & <img src=x onerror=y>"


def rendered_text(md: str) -> str:
    """What a Markdown renderer would take as markup: the text outside code blocks and code spans."""
    outside, fence = [], None
    for line in md.splitlines():
        stripped = line.strip()
        if fence is None and re.fullmatch(r"`{3,}", stripped):
            fence = stripped
        elif fence is not None and stripped == fence:
            fence = None
        elif fence is None:
            outside.append(re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", line))
    assert fence is None, "a code block never closed"
    return "\n".join(outside)


def assert_escaped(md: str) -> None:
    text = rendered_text(md)
    assert "<" not in text and ">" not in text.replace("\n>", "\n").lstrip(">"), text
    for unescaped in re.findall(r"(?<!\\)[*\[\]`]", text.replace("**", "")):
        raise AssertionError(f"unescaped {unescaped!r} in {text}")
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    widths = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
    assert len(widths) <= 1 or _tables_agree(md), widths


def _tables_agree(md: str) -> bool:
    """Every row of each table has its header's number of cells."""
    for block in re.split(r"\n(?!\| )", md):
        rows = [line for line in block.splitlines() if line.startswith("| ")]
        if len({len(re.findall(r"(?<!\\)\|", row)) for row in rows}) > 1:
            return False
    return True


def test_the_summary_escapes_names_logs_and_the_environment() -> None:
    env = {"cpu_name": HOSTILE, "profiler": "torch", "preset": "smoke", "torch": SCRIPT}
    ops = Cells(["op", "ms"], [False, True], [[HOSTILE, "1.0"], ["segmented_unique", "2.0"]])
    summary = markdown.summary(
        title="Latency",
        ratios="dyn / trc",
        environment_line=environment.one_line(env),
        cpu_note="",
        headline=Cells(["config"], [False], [[LABELS[0]]]),
        failed=[markdown.FailedSummary(LABELS[3], "profile", "1", f"```\n{SCRIPT}\n````\nRuntimeError")],
        top_ops=ops,
        comparison_name=f"old`{SCRIPT}",
        config_deltas=ops,
        op_deltas=ops,
        comparison_notes=[markdown.md_text(HOSTILE)],
    )
    assert_escaped(summary)
    assert "| segmented_unique | 2.0 |" in summary  # a name that needs nothing stays as it is
    assert f"| {LABELS[0]} |" in summary
    assert "&lt;script&gt;alert(1)&lt;/script&gt; \\| \\*bold\\* \\[link\\](javascript:x)" in summary
    assert "RuntimeError" in summary and SCRIPT in summary  # the log tail, whole, in its code block


def test_diff_markdown_escapes_op_names_and_the_environment(tmp_path: Path, capsys) -> None:
    old = write_results(tmp_path / "old", failed=None)
    path = old / "benchmark_results.json"
    path.write_text(json.dumps([r | {"gpu_name": "NVIDIA H200"} for r in json.loads(path.read_text())]))
    for results, scale in ((old, 1.0), (Path(shutil.copytree(old, tmp_path / "new")), 2.0)):
        csv = results / "opcalls" / f"opcalls__{LABELS[0]}.csv"
        frame = pd.read_csv(csv, keep_default_na=False)
        hostile = frame["op"] == "cache_lookup"
        frame.loc[hostile, "op"] = HOSTILE
        frame.loc[hostile, "avg_ms_per_iter"] *= scale
        frame.to_csv(csv, index=False)
    new = tmp_path / "new"
    path = new / "benchmark_results.json"
    records = json.loads(path.read_text())
    for record in records:
        record["gpu_name"] = SCRIPT
        for metric in ("dyn_train_ms", "dyn_eval_ms"):
            record["timings"][metric]["repeats"] = [2 * v for v in record["timings"][metric]["repeats"]]
    path.write_text(json.dumps(records))
    assert main(["diff", str(old), str(new), "--format", "markdown", "--ops", "50"]) == 0
    out = capsys.readouterr().out
    assert "GPU differs" in out and "&lt;script&gt;" in out
    assert "&lt;img src=x onerror=y&gt;" in out  # the op, in the per-op table
    assert_escaped(out.replace("<details><summary>Per op: the largest moves</summary>", "").replace(
        "</details>", "").replace("<sub>", "").replace("</sub>", ""))
