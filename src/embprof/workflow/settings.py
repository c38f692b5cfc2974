"""The settings and code that shaped a step's outputs, recorded in ``results/settings/`` so that
they travel with the outputs.

Snakemake notices a changed setting or code through the params it keeps in
``.snakemake/metadata``, which a copied ``results/`` does not carry, and through mtimes,
which a copy may not keep either. So each job's settings, and the digest of the code it
runs (:mod:`embprof.workflow.code`), are recorded beside its outputs:
``results/settings/<rule>.json`` for a rule of one job, ``results/settings/<rule>/<label>.json``
for a rule of one job per config. Three rules hold:

- **A record is changed only by the job that made what it describes.** The job's input
  is not the record but a *plan* beside it under ``.snakemake/embprof/settings/`` (same
  relative path), which planning may write freely: a plan whose settings the record holds
  is dated 0 (it re-runs nothing), one that differs is dated now (its job re-runs). The
  job's command writes the record from its plan once it has succeeded (``embprof
  <step> ... --record-settings PLAN``: :func:`record_from_plan`); a dry run, a
  ``--touch``, a run that stops on the lock and a job that fails write none.
- **A change re-runs its job in any copy of the results, whatever the mtimes.** Until the
  job records it, a plan that differs from its record is dated now again, with the time in
  it, every time it is planned, so neither a copy's timestamps nor ``--touch`` (nor the
  input checksums Snakemake keeps) make the job look done.
- **What was never recorded is taken as it is now.** A results folder written before a
  record existed (or before it held a key, e.g. the code digest) is not re-made: the
  missing record, or key, is filled in (outside dry runs), dated 0, as Snakemake takes
  outputs without metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from embprof.atomic import write_text
from embprof.errors import ConfigError

PLANS = Path(".snakemake", "embprof", "settings")
# A plan whose settings are recorded: dated before any output, so it re-runs nothing.
_SETTLED = 0
PLANNED_AT = "planned_at_ns"  # in a plan of changed settings only


def settings_text(settings: Mapping[str, Any]) -> str:
    """A record's content: canonical JSON, so equal settings give equal bytes."""
    return _canonical(json.dumps(dict(settings), sort_keys=True))


@lru_cache(maxsize=1024)
def _canonical(compact: str) -> str:
    """The indented text of compact JSON (json's indenting encoder is pure Python; the jobs of one
    rule share their settings, so a run's hundreds of plans are a handful of texts)."""
    return json.dumps(json.loads(compact), indent=1, sort_keys=True) + "\n"


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # missing, or unreadable: as good as no record
    return data if isinstance(data, dict) else None


class Settings:
    """One run's plans: the input file of each job whose outputs settings shape.

    ``known``: a file that remembers, for each settled plan, the text it holds and the identity
    (inode, size, mtime, ctime) of it and of its record, so that the next planning of the same
    settings, with neither file touched since, reads neither (a dry run of hundreds of configs
    reads hundreds of small files otherwise). Only a shortcut: any change of either file, or of
    the settings, plans as without it, and so does a run that is not dry where the record still
    lacks a key (it fills it in).
    """

    def __init__(self, plans: str | os.PathLike[str] = PLANS, known: str | os.PathLike[str] | None = None) -> None:
        self.plans = Path(plans)
        self._planned: dict[tuple[Path, str], Path] = {}
        self._known_path = Path(known) if known is not None else None
        self._known = _load_known(self._known_path)
        self._known_changed = False

    def plan(self, record: str | os.PathLike[str], settings: Mapping[str, Any], dry: bool = False) -> Path:
        """The input file of a job whose outputs ``settings`` shape, recorded at ``record``; ``dry``:
        a dry run, which writes nothing in ``results/`` (Snakemake knows it only once it plans)."""
        record = Path(record)
        text = settings_text(settings)
        key = (record, text)
        if key in self._planned:  # once per run: a plan is dated once
            return self._planned[key]
        plan = self.plans / record
        known = self._known.get(str(record))
        if known is not None and known[:3] == [_digest(text), _identity(record), _identity(plan)] and (known[3] or dry):
            self._planned[key] = plan  # settled when last planned, neither file touched since
            return plan
        wanted = json.loads(text)
        held = _read(record)
        if (held is None and not record.exists()) or (held is not None and _agrees(held, wanted)):
            filled = {**(held or {}), **wanted}
            if held != filled and not dry:  # fill in what was never recorded, dated 0
                write_text(record, settings_text(filled))
                os.utime(record, (_SETTLED, _SETTLED))
            self._settle(plan, text)
            # Remembered with whether the record holds it all (else a run that is not dry fills it in).
            self._remember(record, [_digest(text), _identity(record), _identity(plan), held == filled or not dry])
        else:
            # Dated now, and stamped with the time: the job re-runs until it records these settings
            # (Snakemake takes an input newer than the outputs as unchanged when its checksum is the
            # one it recorded for the job, as a --touch records it).
            write_text(plan, settings_text({**wanted, PLANNED_AT: time.time_ns()}))
            self._remember(record, None)
        self._planned[key] = plan
        return plan

    def save(self) -> None:
        """Keep what the settled plans were, for the next planning (a failure only costs time)."""
        if self._known_path is None or not self._known_changed:
            return
        try:
            write_text(self._known_path, json.dumps(self._known))
        except OSError:
            pass

    def _remember(self, record: Path, entry: list | None) -> None:
        if self._known_path is None or self._known.get(str(record)) == entry:
            return
        if entry is None:
            self._known.pop(str(record), None)
        else:
            self._known[str(record)] = entry
        self._known_changed = True

    def _settle(self, plan: Path, text: str) -> None:
        try:
            if plan.stat().st_mtime == _SETTLED and plan.read_text(encoding="utf-8") == text:
                return
        except OSError:
            pass
        write_text(plan, text)
        os.utime(plan, (_SETTLED, _SETTLED))


@lru_cache(maxsize=1024)
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _identity(path: Path) -> list[int] | None:
    """What changes whenever a file is written, renamed over or copied in (ctime is the system's)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _load_known(path: Path | None) -> dict[str, list]:
    if path is None:
        return {}
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _agrees(held: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """The record holds these settings: every key both have is equal (a key it lacks was never recorded)."""
    return all(held[k] == v for k, v in wanted.items() if k in held)


def record_of(plan: str | os.PathLike[str], plans: str | os.PathLike[str] = PLANS) -> Path:
    """The record a plan stands for (its path below the plans' folder)."""
    try:
        return Path(plan).relative_to(plans)
    except ValueError:
        raise ConfigError(f"--record-settings {plan}: not a settings plan (they lie under {plans}/)") from None


def record_from_plan(plan: str | os.PathLike[str], plans: str | os.PathLike[str] = PLANS) -> Path:
    """Write the record of ``plan`` (its settings, without the planning time): what a job's command
    does once it has made its outputs with them."""
    record = record_of(plan, plans)
    settings = _read(Path(plan))
    if settings is None:
        raise ConfigError(f"--record-settings {plan}: no readable settings plan")
    settings.pop(PLANNED_AT, None)
    write_text(record, settings_text(settings))
    return record
