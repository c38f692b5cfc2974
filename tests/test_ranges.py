import json

import torch

from dynemb.ranges import emit_range, op_range


def test_ranges_reach_the_torch_profiler(tmp_path) -> None:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with emit_range("nsys_iter_0"):
            with op_range("gather_embedding"):
                torch.ones(4).sum()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    assert names == ["nsys_iter_0", "op:gather_embedding"]
    outer, inner = (next(e for e in events if e.get("name") == n) for n in names)
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


def test_ranges_without_profiler_are_inert() -> None:
    with emit_range("x") as r:
        assert r._handle is None
