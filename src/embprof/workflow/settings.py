"""The settings that shaped a step's outputs, kept in ``results/settings/`` so they travel with it.

Snakemake notices a changed setting through the params it stores in
``.snakemake/metadata``, which a copied ``results/`` does not carry. So every
step whose outputs a setting shapes also takes a small JSON file of those
settings as input: the file is rewritten when a setting changes, its new mtime
makes the step's outputs out of date in any clone, and an unchanged setting
leaves it untouched.

A settings file that does not exist yet is written back-dated: outputs made
before it existed (an older results folder) are taken as made with these
settings, as Snakemake would take them without metadata. A dry run writes
nothing in ``results/``: a changed or new settings file goes to a pending
folder instead, which is what the dry run then shows as the updated input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embprof.atomic import write_text
from embprof.errors import ContractError
from embprof.results.jsonfile import read_json

# A new settings file's mtime: before any output, so that it re-runs nothing.
_BACKDATED = 0


def settings_text(settings: Mapping[str, Any]) -> str:
    """The file's content: canonical JSON, so equal settings give equal bytes."""
    return json.dumps(dict(settings), indent=1, sort_keys=True) + "\n"


def _recorded(path: Path) -> Any:
    try:
        return read_json(path)
    except ContractError:
        return None  # unreadable: written again, which re-runs the step


def _write(path: Path, text: str, new: bool) -> Path:
    write_text(path, text)
    if new:
        os.utime(path, (_BACKDATED, _BACKDATED))
    return path


def record_settings(
    path: str | os.PathLike[str], settings: Mapping[str, Any], pending: str | os.PathLike[str] | None = None
) -> Path:
    """The settings file a step takes as input: ``path``, rewritten when ``settings`` differ from it.

    ``pending`` (a dry run): leave ``path`` alone and write a changed or new file
    under that folder instead (same relative path), returning it.
    """
    path = Path(path)
    new = not path.exists()
    if not new and _recorded(path) == json.loads(settings_text(settings)):
        return path
    target = path if pending is None else Path(pending) / path
    return _write(target, settings_text(settings), new)
