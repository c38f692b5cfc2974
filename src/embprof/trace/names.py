"""Short names for GPU work, the same whichever profiler recorded it.

nsys stores a ``shortName`` per kernel (the function's base name: no return
type, namespaces, template arguments or parameters). Kineto only has the
demangled name, so :func:`short_kernel_name` derives the same short form;
the tests check it against every (demangledName, shortName) pair in the
nsys fixtures.
"""

from __future__ import annotations

import re

import numpy as np

# CUPTI's memcpy kinds (ENUM_CUDA_MEMCPY_OPER), used when an export lacks the enum table.
MEMCPY_KINDS = {
    0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
    7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD",
}
MEMSET_NAME = "memset"
# CUPTI's memory kinds (ENUM_CUDA_MEM_KIND), as the per-op CSV's memory_kinds names them.
MEMORY_KINDS = ("pageable", "pinned", "device", "array", "managed", "device static", "managed static", "unknown")
_UNKNOWN_MEMORY = len(MEMORY_KINDS) - 1
_MEMSET_SOURCE = 16  # a memset's code: no source memory
_KINETO_KINDS = re.compile(r"\((\w[\w ]*?) -> (\w[\w ]*?)\)$")
_KINETO_MEMSET = re.compile(r"\((\w[\w ]*?)\)$")


def memory_kind_code(src: np.ndarray, dst: np.ndarray, memset: bool = False) -> np.ndarray:
    """One code per copy (source and destination kind) or memset (its kind), 1 or more; kinds out
    of the enum count as unknown."""
    src, dst = (np.where((k >= 0) & (k < len(MEMORY_KINDS)), k, _UNKNOWN_MEMORY) for k in (src, dst))
    return 1 + (_MEMSET_SOURCE if memset else src) * 32 + dst


def memory_kind_name(code: int) -> str:
    """``pinned->device`` for a copy, ``device`` for a memset; '' for 0 (a kernel)."""
    if code <= 0:
        return ""
    src, dst = divmod(code - 1, 32)
    return MEMORY_KINDS[dst] if src == _MEMSET_SOURCE else f"{MEMORY_KINDS[src]}->{MEMORY_KINDS[dst]}"


def kineto_memory_kind(name: str, category: str) -> int:
    """Kineto ``Memcpy HtoD (Pinned -> Device)`` / ``Memset (Device)`` -> :func:`memory_kind_code`."""
    index = {k: i for i, k in enumerate(MEMORY_KINDS)}
    if category == "gpu_memset":
        m = _KINETO_MEMSET.search(name)
        kind = index.get(m.group(1).lower(), _UNKNOWN_MEMORY) if m else _UNKNOWN_MEMORY
        return int(memory_kind_code(np.array([0]), np.array([kind]), memset=True)[0])
    m = _KINETO_KINDS.search(name)
    src, dst = ((index.get(m.group(1).lower(), _UNKNOWN_MEMORY), index.get(m.group(2).lower(), _UNKNOWN_MEMORY))
                if m else (_UNKNOWN_MEMORY, _UNKNOWN_MEMORY))
    return int(memory_kind_code(np.array([src]), np.array([dst]))[0])
_KINETO_MEMCPY = re.compile(r"^Memcpy (\w+)")
_OPEN = {")": "(", ">": "<", "]": "["}


def memcpy_name(kind: str) -> str:
    return f"memcpy {kind}"


def _strip_trailing_group(name: str, close: str) -> str:
    """Drop a trailing balanced ``(...)`` or ``<...>`` group (nesting-aware)."""
    if not name.endswith(close):
        return name
    opener, depth = _OPEN[close], 0
    for i in range(len(name) - 1, -1, -1):
        c = name[i]
        if c == close:
            depth += 1
        elif c == opener:
            depth -= 1
            if depth == 0:
                return name[:i].rstrip()
    return name


def _split_top_level(name: str, sep: str) -> list[str]:
    """Split on ``sep`` outside any (), <>, [] nesting."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(name):
        c = name[i]
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth = max(depth - 1, 0)
        elif depth == 0 and name.startswith(sep, i):
            parts.append(name[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(name[start:])
    return parts


def short_kernel_name(demangled: str) -> str:
    """``void ns::f<T>(args)`` -> ``f``: the base name nsys shows as ``shortName``."""
    name = demangled.strip()
    name = _strip_trailing_group(name, ")")
    name = _strip_trailing_group(name, ">")
    words = _split_top_level(name, " ")
    name = words[-1] if words else name
    scopes = _split_top_level(name, "::")
    base = scopes[-1] if scopes else name
    base = _strip_trailing_group(base, ">")
    return base or demangled


def kineto_memory_name(name: str, category: str) -> str:
    """Kineto ``Memcpy DtoD (Device -> Device)`` -> ``memcpy DtoD``; memsets -> ``memset``."""
    if category == "gpu_memset":
        return MEMSET_NAME
    m = _KINETO_MEMCPY.match(name)
    return memcpy_name(m.group(1) if m else "Unknown")
