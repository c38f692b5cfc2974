"""Fallback categories for work under no ``op:*`` range (``kernel_categories.yaml``; default in package data)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from embprof.defaults import KERNEL_CATEGORIES, default_file, read_yaml
from embprof.errors import ConfigError


@dataclass(frozen=True)
class Categories:
    rules: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]
    unmatched: str

    def of(self, short_name: str) -> str:
        for category, patterns in self.rules:
            if any(p.search(short_name) for p in patterns):
                return category
        return self.unmatched


def load_categories(path: Path | None = None) -> Categories:
    path = Path(path) if path is not None else default_file(KERNEL_CATEGORIES)
    doc = read_yaml(path, "kernel categories")
    try:
        rules = tuple(
            (str(c["name"]), tuple(re.compile(p) for p in c["patterns"])) for c in doc.get("categories", [])
        )
        return Categories(rules=rules, unmatched=str(doc.get("unmatched", "(unwrapped)")))
    except (AttributeError, KeyError, TypeError, re.error) as exc:
        raise ConfigError(f"{path}: bad kernel categories file ({type(exc).__name__}: {exc}); expected categories: [{{name, patterns: [regex]}}]") from None
