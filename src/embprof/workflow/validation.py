"""Config validation with errors a person can act on: one line per problem, naming the key."""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Any

import jsonschema
import yaml

from embprof.defaults import CONFIG_SCHEMA, default_file
from embprof.errors import ConfigError


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def validate_config(
    config: MutableMapping[str, Any], schema_path: str | os.PathLike[str] | None = None
) -> None:
    """Check ``config`` against the YAML JSON schema (default: the packaged one), then fill
    top-level defaults in place; :class:`ConfigError` lists every problem, one line each."""
    schema_path = default_file(CONFIG_SCHEMA) if schema_path is None else schema_path
    with open(schema_path, encoding="utf-8") as handle:
        schema = yaml.safe_load(handle)
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(dict(config)), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"  {_where(e)}: {e.message}" for e in errors]
        raise ConfigError("invalid config:\n" + "\n".join(lines))
    for key, spec in schema.get("properties", {}).items():
        if key not in config and "default" in spec:
            config[key] = spec["default"]
