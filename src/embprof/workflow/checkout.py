"""Modules of this project's benchmark suite that the workflow reads when the Snakefile is parsed.

This project's suite states its facts without running it, in modules that import nothing but
embprof (no torch, no pytest): ``suite/configs.py`` (its presets and their labels, what a
``-k`` expression or an override may do: :func:`embprof.workflow.preflight.suite_facts`) and
``suite/embedding_collection/family.py`` (the EmbeddingCollection family's config:
:func:`embprof.workflow.ec.load_family`). The suite is the checkout's measured code, not part of
the installed package (the embprof that runs the workflow may come from another checkout or
version), so these come from the checkout's own files, loaded by path: nothing is put on
``sys.path`` (before issue 33 the rules inserted the checkout there to import ``benchmark``, the suite's name then).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from embprof.errors import SuiteError

SUITE_FACTS = "suite/configs.py"
EC_FAMILY = "suite/embedding_collection/family.py"


def suite_module(checkout: str | os.PathLike[str], relpath: str) -> ModuleType:
    """The module at ``relpath`` in ``checkout``, loaded from its file, once per process.

    It gets a name of its own, from its path, so that it neither takes nor replaces a ``suite``
    module of the process or another checkout's copy; so it must import no module of the suite by
    name (``suite.configs`` and ``family`` import embprof and the standard library only).
    """
    path = (Path(checkout) / relpath).resolve()
    name = f"_embprof_suite_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    if not path.is_file():
        raise SuiteError(f"{checkout}: no {relpath} (this project's benchmark suite)")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while their classes are made
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
