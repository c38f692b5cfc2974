"""The workflow's EmbeddingCollection config family: its YAML, checked, and the launcher command of each run.

Read by ``rules/embedding_collection.smk`` at parse time, so it imports no torch.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class FamilyError(ValueError):
    """The family's YAML is malformed; the message names the key."""


@dataclass(frozen=True)
class Run:
    use_index_dedup: bool
    use_dynamic_embedding: bool
    batch_size: int


@dataclass(frozen=True)
class Family:
    runs: dict[str, Run]
    common_args: tuple[str, ...]
    nproc: int | None
    profile: bool

    def launcher_args(self, name: str) -> str:
        """The launcher's positional arguments and the common flags of run ``name``, shell-quoted."""
        run = self.runs[name]
        words = [
            str(run.use_index_dedup),
            str(run.use_dynamic_embedding),
            str(run.batch_size),
            *self.common_args,
        ]
        return " ".join(shlex.quote(w) for w in words)

    def env(self) -> str:
        """``NPROC=<n>`` for the shell, or nothing (the launcher picks)."""
        return f"NPROC={self.nproc}" if self.nproc else ""


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise FamilyError(f"{where} must be true or false, got {value!r}")
    return value


def load_family(path: str | Path) -> Family:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FamilyError(f"{path}: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict) or not data["runs"]:
        raise FamilyError(f"{path}: needs a non-empty 'runs' mapping")
    runs = {}
    for name, spec in data["runs"].items():
        where = f"{path}: runs.{name}"
        if not _NAME.match(str(name)):
            raise FamilyError(f"{where}: a run name may hold only letters, digits, '_', '.', '-'")
        if not isinstance(spec, list) or len(spec) != 3:
            raise FamilyError(
                f"{where} must be [use_index_dedup, use_dynamic_embedding, batch_size]"
            )
        dedup, dynamic, batch = spec
        if not isinstance(batch, int) or isinstance(batch, bool) or batch <= 0:
            raise FamilyError(f"{where}: batch size must be a positive integer, got {batch!r}")
        runs[str(name)] = Run(_flag(dedup, f"{where}[0]"), _flag(dynamic, f"{where}[1]"), batch)
    common = data.get("common_args", [])
    if not isinstance(common, list):
        raise FamilyError(f"{path}: common_args must be a list of flags")
    nproc = data.get("nproc")
    if nproc is not None and (not isinstance(nproc, int) or isinstance(nproc, bool) or nproc <= 0):
        raise FamilyError(f"{path}: nproc must be a positive integer or null, got {nproc!r}")
    return Family(
        runs,
        tuple(str(a) for a in common),
        nproc,
        _flag(data.get("profile", True), f"{path}: profile"),
    )
