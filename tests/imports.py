"""What a piece of this project's code imports, read from its source (nothing is imported).

The import closure of a start module follows every ``import`` statement, at
module level or inside a function (a lazy import still runs on some path),
into this project's own packages (``embprof``, ``dynemb``, ``suite``), and
collects the top-level names of everything else outside the standard library
(and :data:`BUILT_ELSEWHERE`).
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OWN = {"embprof": REPO / "src", "dynemb": REPO / "src", "suite": REPO}
# Modules whose distribution differs between the CPU and the CUDA build.
ALTERNATIVES = {"fbgemm_gpu": {"fbgemm-gpu", "fbgemm-gpu-cpu"}}
# Optional modules that no lock or environment provides, left out of every closure: NVIDIA's
# dynamicemb is built from its source on the GPU host (../shared/upstream); without it the
# benchmark suite skips its backend (nv) with the reason.
BUILT_ELSEWHERE = frozenset({"dynamicemb"})


def module_file(name: str) -> Path | None:
    """The source file of one of this project's modules (a package's ``__init__.py``)."""
    root = OWN.get(name.split(".")[0])
    if root is None:
        return None
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_of(path: Path) -> str:
    root = OWN["suite"] if path.is_relative_to(REPO / "suite") else OWN["embprof"]
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _nodes(tree: ast.AST):
    """Every node, except what ``if TYPE_CHECKING:`` holds (type checkers' imports never run)."""
    for node in ast.iter_child_nodes(tree):
        test = node.test if isinstance(node, ast.If) else None
        if test is not None and "TYPE_CHECKING" in ast.unparse(test):
            yield from (n for child in node.orelse for n in (child, *_nodes(child)))
            continue
        yield node
        yield from _nodes(node)


def _imported(path: Path) -> set[str]:
    """Absolute names of what ``path`` imports (``from a import b`` yields ``a`` and ``a.b``)."""
    here = _module_of(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    names: set[str] = set()
    for node in _nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def third_party_imports(*start: str | Path) -> set[str]:
    """Top-level names of the modules outside this project and the standard library that the
    import closure of ``start`` (module names or files) imports."""
    todo = [module_file(s) if isinstance(s, str) else Path(s) for s in start]
    if None in todo:
        raise ValueError(f"not a module of this project: {start}")
    seen: set[Path] = set()
    found: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imported(path):
            top = name.split(".")[0]
            if top in OWN:
                own = module_file(name)
                if own is not None:
                    todo.append(own)
            elif top and top not in sys.stdlib_module_names and top not in {"__future__", *BUILT_ELSEWHERE}:
                found.add(top)
    return found


def normalize(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def distributions_of(module: str) -> set[str]:
    """The distributions (normalized names) that can provide a top-level module."""
    known = metadata.packages_distributions().get(module, [])
    return {normalize(d) for d in known} | ALTERNATIVES.get(module, set())
