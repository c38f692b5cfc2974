"""The code each workflow step runs, found from its command's imports (issue 33, item 2): no module
the command imports is missed, editing one changes the digest of exactly the steps that import it,
and the cache that keeps the dry run fast never hides an edit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import embprof
from embprof.workflow.code import STEP_COMMANDS, CodeGraph, step_digests, tree_digest

PACKAGE = Path(embprof.__file__).parent

# In a fresh interpreter: each module of the package imported alone (the package's other modules
# dropped from sys.modules before each), and the embprof modules that import loaded.
_LOADED = """
import importlib, json, sys
out = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "embprof" or m.startswith("embprof.")]:
        del sys.modules[loaded]
    importlib.import_module(name)
    out[name] = sorted(m for m in sys.modules if m == "embprof" or m.startswith("embprof."))
print(json.dumps(out))
"""


def _modules(graph: CodeGraph) -> list[str]:
    names = []
    for rel in sorted(graph._files):
        if rel.endswith(".py"):
            parts = ["embprof", *rel.removesuffix(".py").split("/")]
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_an_import_loads_is_in_its_static_closure() -> None:
    """Python's own imports are the truth: what importing any module loads, its closure holds (the
    closure holds more: the imports inside functions, which commands use to start fast)."""
    graph = CodeGraph(PACKAGE)
    modules = [m for m in _modules(graph) if not m.endswith("__main__")]
    done = subprocess.run([sys.executable, "-c", _LOADED, json.dumps(modules)], capture_output=True, text=True,
                          timeout=300, check=True)
    for name, loaded in json.loads(done.stdout).items():
        closure = set(graph.closure(name))
        missed = [m for m in loaded if graph.file_of(m) not in closure]
        assert not missed, f"{name} loads {missed}, which its closure lacks"


def test_peak_bandwidth_runs_the_bandwidth_table_and_the_environment() -> None:
    """The hand-kept list had bandwidth/peak.py only (issue 33, item 2)."""
    closure = CodeGraph(PACKAGE).closure("embprof.cli.peak_bandwidth")
    assert {"bandwidth/peak.py", "bandwidth/table.py", "workflow/environment.py", "cli/peak_bandwidth.py"} <= set(closure)
    assert "trace/sweep.py" not in closure and "report/build.py" not in closure
    report = CodeGraph(PACKAGE).closure("embprof.cli.report")
    assert {"report/templates/report.html.j2", "pages/templates/base.html.j2"} <= set(report)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    return Path(shutil.copytree(PACKAGE, tmp_path / "embprof", ignore=shutil.ignore_patterns("__pycache__")))


def test_an_edit_changes_the_digests_of_the_steps_that_run_it_and_no_other(package: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache.json"
    before = step_digests(package, cache)
    graph = CodeGraph(package, cache)
    closures = {step: set(graph.closure(f"embprof.cli.{command}")) for step, command in STEP_COMMANDS.items()}
    files = sorted(rel for rel in graph._files if not rel.startswith("data/"))
    assert len(files) > 100
    for rel in files:
        path = package / rel
        original = path.read_bytes()
        path.write_bytes(original + b"\n#\n")
        try:
            after = step_digests(package, cache)
        finally:
            path.write_bytes(original)
        changed = {step for step in STEP_COMMANDS if after[step] != before[step]}
        assert changed == {step for step, files in closures.items() if rel in files}, rel
    assert step_digests(package, cache) == before  # the content back: the digests back, whatever the mtimes


def test_the_cache_is_only_a_shortcut(package: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache.json"
    cold = step_digests(package)
    assert step_digests(package, cache) == cold and cache.is_file()
    assert step_digests(package, cache) == cold  # from the cache
    cache.write_text("{not json")
    assert step_digests(package, cache) == cold
    # Another checkout of the same code: the same digests (names are relative to the package).
    other = Path(shutil.copytree(package, tmp_path / "other" / "embprof"))
    assert step_digests(other, cache) == cold


def test_the_measured_code_digest_is_of_its_folders_only(tmp_path: Path) -> None:
    for folder in ("suite", "src/dynemb", "results"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "a.py").write_text(folder)
    digest = tree_digest(tmp_path, ["suite", "src/dynemb"], tmp_path / "c.json")
    (tmp_path / "results" / "a.py").write_text("changed")
    assert tree_digest(tmp_path, ["suite", "src/dynemb"], tmp_path / "c.json") == digest
    (tmp_path / "src/dynemb" / "a.py").write_text("changed")
    assert tree_digest(tmp_path, ["suite", "src/dynemb"], tmp_path / "c.json") != digest
