"""What the Snakefile's input functions share beyond the run itself (:mod:`embprof.workflow.run`).

Snakemake inspects an input or params function's signature at every call, to hand it the
optional arguments it names (``input``, ``output``, ``threads``, ...): ``inspect.signature``
is paid once per job of every per-config rule, a good part of a dry run's time in the
input functions (benchmarks/README.md, "Dry run"). A signature computed once and kept as
the function's ``__signature__`` is what ``inspect.signature`` returns at once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])


def cheap_signature(func: F) -> F:
    """``func``, its signature computed now and kept, so that inspecting it again costs nothing."""
    func.__signature__ = inspect.signature(func)  # type: ignore[attr-defined]
    return func
