"""Step records (``steps/<step>/<label>.json``) and the per-config status merged from them
(``status/<label>.json``): a config that fails is data, not a broken run."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from embprof.atomic import write_json
from embprof.errors import ContractError
from embprof.labels import parse_label
from embprof.results.configs import read_configs
from embprof.results.jsonfile import read_object
from embprof.results.paths import ResultsPaths

# The order in which steps happen; the first failed one names the failure.
STEP_ORDER = ("collect", "profile", "export", "breakdown", "sunburst", "timing")
# The steps that run the benchmark and leave a record whether or not it worked.
RUN_STEPS = ("profile", "timing")
STATUS_KEYS = ("label", "ok", "failed_step", "returncode", "log", "log_tail")


@dataclass(frozen=True)
class StepRecord:
    """What one step of one config did."""

    step: str
    label: str
    test_id: str
    ok: bool
    returncode: int | None
    log: str | None
    log_tail: str = ""
    reason: str = ""
    command: list[str] = field(default_factory=list)

    def write(self, path: str | os.PathLike[str]) -> None:
        write_json(path, asdict(self))

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> StepRecord:
        data = read_object(path, "a step record")
        try:
            record = cls(**data)
        except TypeError as exc:
            raise ContractError(f"{path}: not a step record ({exc})") from None
        if not isinstance(record.ok, bool) or not isinstance(record.step, str):
            raise ContractError(f"{path}: not a step record (ok must be true or false, step a name)")
        return record


def merge_status(label: str, test_id: str, records: Sequence[StepRecord]) -> dict[str, Any]:
    """The per-config status: ok when every step is; else the first failed step and its tail."""
    wrong = sorted({r.label for r in records if r.label != label})
    if wrong:
        raise ContractError(f"step records of other configs given: {wrong}")
    ordered = sorted(records, key=lambda r: STEP_ORDER.index(r.step) if r.step in STEP_ORDER else 99)
    failed = next((r for r in ordered if not r.ok), None)
    shown = failed or (ordered[0] if ordered else None)
    return {
        "label": label,
        "test_id": test_id,
        "ok": failed is None,
        "failed_step": failed.step if failed else None,
        "returncode": failed.returncode if failed else None,
        "log": shown.log if shown else None,
        "log_tail": failed.log_tail if failed else "",
        "reason": failed.reason if failed else "",
        "steps": {
            r.step: {"ok": r.ok, "returncode": r.returncode, "log": r.log} for r in ordered
        },
    }


def write_status(path: str | os.PathLike[str], status: dict[str, Any]) -> None:
    write_json(path, status)


def write_statuses(paths: ResultsPaths) -> list[Path]:
    """The status of every config of the folder's ``configs.tsv``, from its profile and timing records.

    Every record is read before anything is written; statuses of configs no longer
    in the table are removed, so the folder holds this run's configs only.
    """
    configs = read_configs(paths.configs)
    statuses = {
        c.label: merge_status(c.label, c.test_id, [StepRecord.read(paths.step(step, c.label)) for step in RUN_STEPS])
        for c in configs
    }
    written = [paths.status(label) for label in statuses]
    for path, status in zip(written, statuses.values(), strict=True):
        write_status(path, status)
    for stale in set(paths.status_dir.glob("*.json")) - set(written):
        stale.unlink()
    return written


def read_status(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One config's status, with the keys the report and the input functions rely on."""
    data = read_object(path, "a config status")
    if any(k not in data for k in STATUS_KEYS):
        raise ContractError(f"{path}: expected an object with keys {', '.join(STATUS_KEYS)}")
    label = data["label"]
    try:
        parse_label(label if isinstance(label, str) else "")
    except ValueError:
        raise ContractError(f"{path}: status: not a config label: {label!r}") from None
    if not isinstance(data["ok"], bool):
        raise ContractError(f"{path}: status: ok must be true or false, got {data['ok']!r}")
    if not data["ok"] and not isinstance(data["failed_step"], str):
        raise ContractError(f"{path}: status: a failed config needs its failed_step, got {data['failed_step']!r}")
    return data


def read_statuses(status_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``status/<label>.json`` of every config in the folder, by label."""
    folder = Path(status_dir)
    if not folder.is_dir():
        raise ContractError(f"{folder}: no such directory")
    statuses = [read_status(path) for path in sorted(folder.glob("*.json"))]
    return {s["label"]: s for s in statuses}


def succeeded(statuses: Mapping[str, Mapping[str, Any]], labels: Iterable[str]) -> list[str]:
    """The ``labels`` whose status is ok: only they have per-op outputs of this run (per-op CSV,
    sunburst, bandwidth). A failed config shows only its failure; whatever an earlier run
    left in opcalls/, sunburst/ or bandwidth/ for it is never read."""
    return [label for label in labels if label in statuses and statuses[label]["ok"]]
