"""This project's scripts (``tools/``, ``benchmarks/``) as modules the tests call: each is a program,
not a package, so it is loaded from its file, once per process, and nothing is put on ``sys.path``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(relpath: str) -> ModuleType:
    """The script at ``relpath`` (from the checkout's root) as a module named by its file's stem."""
    path = REPO / relpath
    name = path.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while their classes are made
    spec.loader.exec_module(module)
    return module
