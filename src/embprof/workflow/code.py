"""The code each step of the workflow runs, found from what its command imports, and its digest.

A step's outputs depend on the embprof modules its command (``embprof <step>``, the module
``embprof.cli.<step>``) imports, directly or not, and on the templates of the packages it
loads by name. A hand-kept list of them goes stale (issue 33: ``peak_bandwidth`` listed
``bandwidth/peak.py`` but not the ``bandwidth/table.py`` it imports), so the list is the
import graph, read statically with :mod:`ast` within the package: every ``import`` and
``from ... import`` anywhere in a module (inside functions too: commands import their
heavy parts lazily), each package a module lies in (Python runs its ``__init__``), and
every string that names a module or package of embprof (``python -m
embprof.plots.render_worker``, Jinja's ``PackageLoader("embprof.report")``); a package
named by a string brings the files of its non-package folders (its templates). Imports
built at run time from a variable (``embprof.cli``'s table of commands) are not followed:
the command a step runs is named by the step itself.

Parsing the package costs a tenth of a second on every DAG pass: each file's imports and
content hash are kept in a cache keyed by its size and mtime, so a dry run reads only what
changed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from embprof.atomic import write_text

PACKAGE = "embprof"
# Each rule that runs an embprof command, and the command's module under embprof.cli.
STEP_COMMANDS = {
    "collect": "collect", "profile": "profile", "export": "export", "breakdown": "breakdown",
    "timing": "timing", "status": "status", "aggregate": "aggregate", "plotly_js": "plotly_js",
    "sunburst": "sunburst", "latency_plot": "latency_plot", "peak_bandwidth": "peak_bandwidth",
    "bandwidth": "bandwidth", "bandwidth_plot": "bandwidth_plot", "environment": "environment",
    "report": "report", "database": "db",
}
_CACHE_VERSION = 1


class _Files:
    """Every file under ``root`` with its size, mtime, content hash and (Python) references,
    hashed or parsed again only where the cache's size and mtime differ."""

    def __init__(self, root: Path, cache: Path | None, parse: bool, folders: Iterable[str] = ("",)) -> None:
        self.root, self._cache_path = root, cache
        old = self._load_cache()
        self.files: dict[str, dict] = {}  # posix path under root -> {stamp, sha[, imports, names]}
        paths = sorted(p for folder in folders if (root / folder).is_dir() for p in (root / folder).rglob("*"))
        for path in paths:
            if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            st = path.stat()
            stamp = [st.st_size, st.st_mtime_ns]
            known = old.get(rel)
            if known is not None and known["stamp"] == stamp:
                self.files[rel] = known
                continue
            data = path.read_bytes()
            entry: dict = {"stamp": stamp, "sha": hashlib.sha256(data).hexdigest()}
            if parse and path.suffix == ".py":
                entry["imports"], entry["names"] = _references(data, _module_of(rel), rel.endswith("__init__.py"))
            self.files[rel] = entry
        if cache is not None and self.files != old:
            self._save_cache()

    def _load_cache(self) -> dict[str, dict]:
        if self._cache_path is None:
            return {}
        try:
            data = json.loads(self._cache_path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION or data.get("root") != str(self.root):
            return {}
        files = data.get("files")
        return files if isinstance(files, dict) else {}

    def _save_cache(self) -> None:
        try:
            write_text(self._cache_path, json.dumps({"version": _CACHE_VERSION, "root": str(self.root),
                                                     "files": self.files}))
        except OSError:
            pass  # a read-only working directory: only slower next time

    def digest(self, files: Iterable[str]) -> str:
        """A short hash of the files' names and contents."""
        h = hashlib.sha256()
        for rel in sorted(files):
            h.update(rel.encode() + b"\0" + self.files[rel]["sha"].encode() + b"\0")
        return h.hexdigest()[:16]


def _module_of(rel: str) -> str:
    parts = [PACKAGE, *rel.removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class CodeGraph:
    """The embprof package under ``root`` (the folder of ``embprof/__init__.py``) as an import graph;
    ``cache``: a JSON file that keeps each file's imports and hash between runs."""

    def __init__(self, root: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root)
        self._table = _Files(self.root, Path(cache) if cache is not None else None, parse=True)
        self._files = self._table.files
        self._packages = sorted({rel.removesuffix("__init__.py") for rel in self._files if rel.endswith("__init__.py")})

    def file_of(self, module: str) -> str | None:
        """The file (relative to the root) of an embprof module or package, or None."""
        if module != PACKAGE and not module.startswith(PACKAGE + "."):
            return None
        rel = "/".join(module.split(".")[1:])
        for candidate in (f"{rel}.py", f"{rel}/__init__.py" if rel else "__init__.py"):
            if candidate in self._files:
                return candidate
        return None

    def closure(self, module: str) -> list[str]:
        """Every file ``module`` needs: the modules it imports, directly or not, the packages they
        lie in, and the data folders of the packages it names as strings (sorted, relative)."""
        seen: set[str] = set()
        data_of: set[str] = set()
        todo = [module]
        while todo:
            name = todo.pop()
            rel = self.file_of(name)
            if rel is None or rel in seen:
                continue
            seen.add(rel)
            entry = self._files[rel]
            todo += [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]  # its packages
            todo += entry.get("imports", [])
            for named in entry.get("names", []):
                target = self.file_of(named)
                if target is not None:
                    todo.append(named)
                    if target.endswith("__init__.py"):
                        data_of.add(target.removesuffix("__init__.py"))
        files = set(seen)
        for folder in data_of:
            files |= self._data_files(folder)
        return sorted(files)

    def _data_files(self, folder: str) -> set[str]:
        """Files under a package's folder that are not Python and lie in no subpackage."""
        inner = [p for p in self._packages if p.startswith(folder) and p != folder]
        return {
            rel for rel in self._files
            if rel.startswith(folder) and not rel.endswith(".py") and not any(rel.startswith(p) for p in inner)
        }

    def digest(self, files: Iterable[str]) -> str:
        return self._table.digest(files)


def _references(source: bytes, module: str, is_init: bool) -> tuple[list[str], list[str]]:
    """The embprof modules a file imports (absolute; relative ones resolved against ``module``,
    a package's own when ``is_init``) and the strings in it that look like embprof module names."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return [], []
    here = module.split(".") if is_init else module.split(".")[:-1]
    imports: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            prefix = ".".join(base + ([node.module] if node.module else []))
            imports.add(prefix)
            imports.update(f"{prefix}.{alias.name}" for alias in node.names)  # a submodule, or a name in it
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PACKAGE + "."):
            names.add(node.value)
    keep = sorted(i for i in imports if i == PACKAGE or i.startswith(PACKAGE + "."))
    return keep, sorted(names)


def step_digests(package_root: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None,
                 steps: Mapping[str, str] = STEP_COMMANDS) -> dict[str, str]:
    """Per rule, the digest of the code its command runs."""
    graph = CodeGraph(package_root, cache)
    return {step: graph.digest(graph.closure(f"{PACKAGE}.cli.{command}")) for step, command in steps.items()}


def tree_digest(root: str | os.PathLike[str], folders: Iterable[str], cache: str | os.PathLike[str] | None = None) -> str:
    """The digest of every file under ``root``'s ``folders`` (the measured code: the benchmark
    suite and the library it measures), its hashes cached as the package's are."""
    folders = list(folders)
    table = _Files(Path(root), Path(cache) if cache is not None else None, parse=False, folders=folders)
    return table.digest(table.files)
