"""The configs the workflow runs: enumeration from pytest's collection, per-config overrides,
and the digests that tie a step's outputs to its code.

The collect checkpoint writes the configs to ``results/configs.tsv``
(:mod:`embprof.results.configs`); the rules' input functions read it.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from embprof.labels import parse_label
from embprof.results.configs import BenchConfig

# What an override may change for the configs it matches (the config schema's run_settings).
OVERRIDE_KEYS = ("num_iterations", "profile_iterations", "repeats", "torchrec", "extra_args")
_NODE_ID = re.compile(r"^(?P<test_id>\S+::\S*\[(?P<label>[^\[\]]+)\])$")


def parse_collected(stdout: str) -> list[BenchConfig]:
    """Configs from ``pytest --collect-only -q`` output: node ids that end in ``[<label>]``.

    Raises ``ValueError`` for a bracketed id that is not a config label, or a
    label that two tests share (file names would collide).
    """
    configs: list[BenchConfig] = []
    seen: dict[str, str] = {}
    for line in stdout.splitlines():
        match = _NODE_ID.match(line.strip())
        if match is None:
            continue
        test_id, label = match["test_id"], match["label"]
        parse_label(label)
        if label in seen:
            raise ValueError(f"label {label!r} is shared by {seen[label]} and {test_id}")
        seen[label] = test_id
        configs.append(BenchConfig(test_id, label))
    return configs


def select_by_labels(configs: Sequence[BenchConfig], substrings: Sequence[str]) -> list[BenchConfig]:
    """Configs whose label contains any of ``substrings`` (all configs when none given)."""
    if not substrings:
        return list(configs)
    return [c for c in configs if any(s in c.label for s in substrings)]


def overrides_for(label: str, overrides: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """The settings of every override whose key is a substring of ``label``; later keys win."""
    merged: dict[str, Any] = {}
    for substring, settings in (overrides or {}).items():
        if substring in label:
            merged.update(settings)
    return merged


def code_files(paths: Iterable[str | os.PathLike[str]], root: str | os.PathLike[str] = ".") -> list[str]:
    """The files under ``paths`` (files or folders; missing ones skipped), relative to ``root``."""
    base = Path(root)
    files: set[Path] = set()
    for entry in paths:
        path = base / entry
        if path.is_dir():
            files.update(
                p for p in path.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            )
        elif path.is_file():
            files.add(path)
    return sorted(p.relative_to(base).as_posix() for p in files)


def code_digest(paths: Iterable[str | os.PathLike[str]], root: str | os.PathLike[str] = ".") -> str:
    """A short content hash of the files under ``paths``.

    Rules carry it as a param, so editing the code re-runs them, while a fresh
    clone (same content, new mtimes) re-runs nothing.
    """
    digest = hashlib.sha256()
    for name in code_files(paths, root):
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update((Path(root) / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]
