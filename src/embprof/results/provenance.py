"""Where a measurement came from (docs/DESIGN.md, "Provenance"): in every benchmark record and
in ``environment.json``.

A provenance object holds every field of :data:`FIELDS`; a null field has its
reason in ``null_reasons``. Records and environment files written before
provenance existed read with every field null and the reason
:data:`NOT_RECORDED`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embprof.errors import ContractError

FIELDS = (
    "git_commit", "git_dirty", "kernel_path", "triton", "cuda", "driver", "gpu_clocks",
    "host_load_1m", "cpu_count", "torch_threads", "started_at",
)
# triton+torch: some Triton kernels failed to compile and their steps ran in torch.
KERNEL_PATHS = ("triton", "torch", "triton+torch")
CLOCK_KEYS = ("sm_mhz", "memory_mhz", "max_sm_mhz", "max_memory_mhz")
NOT_RECORDED = "not recorded (written before embprof recorded provenance)"


def check_provenance(value: Any) -> None:
    """A provenance object as a new record carries it: every field, a reason for every null."""
    if not isinstance(value, Mapping):
        raise ContractError(f"provenance must be an object, got {type(value).__name__}")
    missing = [f for f in (*FIELDS, "null_reasons") if f not in value]
    extra = [f for f in value if f not in (*FIELDS, "null_reasons")]
    if missing or extra:
        raise ContractError(f"provenance fields: missing {missing}, unexpected {extra}")
    reasons = value["null_reasons"]
    if not isinstance(reasons, Mapping) or any(not isinstance(r, str) or not r for r in reasons.values()):
        raise ContractError("provenance null_reasons must map fields to non-empty reasons")
    unexplained = [f for f in FIELDS if value[f] is None and f not in reasons]
    if unexplained:
        raise ContractError(f"provenance: null without a reason: {unexplained}")
    if value["kernel_path"] is not None and value["kernel_path"] not in KERNEL_PATHS:
        raise ContractError(f"provenance kernel_path must be one of {KERNEL_PATHS}, got {value['kernel_path']!r}")
    clocks = value["gpu_clocks"]
    if clocks is not None and (not isinstance(clocks, Mapping) or set(clocks) != set(CLOCK_KEYS)):
        raise ContractError(f"provenance gpu_clocks must map {list(CLOCK_KEYS)}")


def read_provenance(holder: Mapping[str, Any]) -> dict[str, Any]:
    """The ``provenance`` of a record or environment file, every field present (older files: null)."""
    given = holder.get("provenance")
    given = given if isinstance(given, Mapping) else {}
    reasons = dict(given.get("null_reasons") or {})
    out: dict[str, Any] = {}
    for field in FIELDS:
        out[field] = given.get(field)
        if out[field] is None:
            reasons.setdefault(field, NOT_RECORDED)
    out["null_reasons"] = {f: reasons[f] for f in FIELDS if out[f] is None}
    return out


def merge_provenance(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One provenance for many records (``environment.json``): a field keeps the value they share.

    ``host_load_1m`` is the highest load any of them started under; a field the
    records disagree on is null with the values they hold as its reason.
    """
    every = [read_provenance({"provenance": p}) for p in items]
    if not every:
        return read_provenance({})
    out: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for field in FIELDS:
        values = [p[field] for p in every if p[field] is not None]
        distinct = sorted({_key(v) for v in values})
        if field == "host_load_1m" and values:
            out[field] = max(values)
        elif field == "started_at" and values:
            out[field] = min(values)
        elif len(distinct) == 1:
            out[field] = values[0]
        else:
            out[field] = None
            reasons[field] = (
                f"the records differ: {', '.join(distinct)}" if distinct
                else every[0]["null_reasons"].get(field, NOT_RECORDED)
            )
    out["null_reasons"] = reasons
    return out


def _key(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={value[k]}" for k in sorted(value))
    return str(value)
