"""The settings and code that shaped a step's outputs, recorded in ``results/settings/`` so that
they travel with the outputs.

Snakemake notices a changed setting or code through the params it keeps in
``.snakemake/metadata``, which a copied ``results/`` does not carry, and through mtimes,
which a copy may not keep either. So each step's settings, and the digest of the code it
runs (:mod:`embprof.workflow.code`), are recorded beside its outputs:
``results/settings/<rule>.json`` (per config for the benchmark's runs,
``results/settings/<rule>/<label>.json``). Three rules hold:

- **A record is changed only by a run that made the outputs it describes.** The step's
  input is not the record but a *plan* beside it in ``.snakemake/embprof/settings/``
  (same relative path), which planning may write freely: a plan whose settings the
  record holds is dated 0 (it re-runs nothing), one that differs is dated now (its step
  re-runs). The records of changed settings are written when the run has succeeded
  (:meth:`Settings.record`, Snakemake's ``onsuccess``), never by a dry run, a ``--touch``,
  a run that stops on the lock or a run that fails.
- **A change re-runs its step in any copy of the results, whatever the mtimes.** Until a
  successful run records it, a plan that differs from its record is dated now again on
  every run, so neither a copy's timestamps nor ``--touch`` make its step look done.
- **What was never recorded is taken as it is now.** A results folder written before a
  record existed (or before it held a key, e.g. the code digest) is not re-made: the
  missing record, or key, is filled in (outside dry runs; again once the run holds
  Snakemake's lock, :meth:`Settings.fill`, so that a run planned at the same time and
  stopped on the lock cannot leave its own), as Snakemake takes outputs without metadata.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embprof.atomic import write_text

PLANS = Path(".snakemake", "embprof", "settings")
# A plan whose settings are recorded: dated before any output, so it re-runs nothing.
_SETTLED = 0
PLANNED_AT = "planned_at_ns"  # in a plan of changed settings only


def settings_text(settings: Mapping[str, Any]) -> str:
    """A record's content: canonical JSON, so equal settings give equal bytes."""
    return json.dumps(dict(settings), indent=1, sort_keys=True) + "\n"


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # missing, or unreadable: as good as no record
    return data if isinstance(data, dict) else None


class Settings:
    """One run's settings records: the plan each step takes as input, and the records to write
    once the run succeeds. ``dry``: a dry run (nothing in ``results/`` is written)."""

    def __init__(self, plans: str | os.PathLike[str] = PLANS, dry: bool = False) -> None:
        self.plans = Path(plans)
        self.dry = dry
        self._planned: dict[tuple[Path, str], Path] = {}
        self._changed: dict[Path, str] = {}  # record -> its new text, written by record()
        self._filled: dict[Path, str] = {}  # record -> what was never recorded, filled in

    def plan(self, record: str | os.PathLike[str], settings: Mapping[str, Any]) -> Path:
        """The input file of a step whose outputs ``settings`` shape, recorded at ``record``."""
        record = Path(record)
        text = settings_text(settings)
        key = (record, text)
        if key in self._planned:  # once per run: a plan is dated once
            return self._planned[key]
        wanted = json.loads(text)
        held = _read(record)
        plan = self.plans / record
        if not record.exists() or (held is not None and _agrees(held, wanted)):
            if held != wanted:
                self._filled[record] = text
                self._write_filled(record, text)
            self._settle(plan, text)
        else:
            # Dated now, and stamped with the time: the step re-runs until a run that succeeds records
            # it (Snakemake takes an input newer than the outputs as unchanged when its checksum is
            # the one it recorded for the job, as a --touch records it).
            write_text(plan, settings_text({**wanted, PLANNED_AT: time.time_ns()}))
            self._changed[record] = text
        self._planned[key] = plan
        return plan

    def _write_filled(self, record: Path, text: str) -> None:
        if not self.dry:
            write_text(record, text)
            os.utime(record, (_SETTLED, _SETTLED))

    def _settle(self, plan: Path, text: str) -> None:
        try:
            if plan.stat().st_mtime == _SETTLED and plan.read_text(encoding="utf-8") == text:
                return
        except OSError:
            pass
        write_text(plan, text)
        os.utime(plan, (_SETTLED, _SETTLED))

    def fill(self) -> None:
        """Write again what this run filled in (call once the run holds the lock: Snakemake's
        ``onstart``), over whatever a run planned at the same time may have filled in."""
        for record, text in self._filled.items():
            self._write_filled(record, text)

    def record(self) -> list[Path]:
        """Write the records of every changed setting planned in this run (call once it has
        succeeded, ``onsuccess``: each step they shape has then run with them)."""
        if self.dry:
            return []
        for record, text in self._changed.items():
            write_text(record, text)
        written, self._changed = sorted(self._changed), {}
        return written

    @property
    def changed(self) -> list[Path]:
        """The records whose settings this run changes (written by :meth:`record`)."""
        return sorted(self._changed)


def _agrees(held: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """The record holds these settings: every key both have is equal (a key it lacks was never recorded)."""
    return all(held[k] == v for k, v in wanted.items() if k in held)
