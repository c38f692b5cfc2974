"""Config validation with errors a person can act on: one line per problem, naming the key.

Values typed on the command line (``--config torchrec=false``) reach the config as
strings wherever Snakemake's own parser does not turn them into numbers (it never
does inside a mapping such as ``overrides``); :func:`validate_config` reads them as
YAML where the schema asks for a boolean, a number or null, so what a user types is
what a config file would have said.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import yaml

from embprof.atomic import write_text
from embprof.defaults import CONFIG_SCHEMA, default_file
from embprof.errors import ConfigError

_REMEMBERED = 32  # valid configs a cache keeps

_TYPED = {"boolean": bool, "integer": int, "number": (int, float), "null": type(None)}


def _where(error: Any) -> str:  # a jsonschema.ValidationError
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def load_schema(schema_path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The config schema (default: the packaged one)."""
    return _load_yaml(_schema_text(schema_path))


def _load_yaml(text: str) -> Any:
    """YAML read as safe_load reads it, by libyaml where PyYAML has it (ten times faster)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _schema_text(schema_path: str | os.PathLike[str] | None) -> str:
    path = default_file(CONFIG_SCHEMA) if schema_path is None else schema_path
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _resolve(spec: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec`` with a local ``$ref`` (``#/definitions/name``) followed."""
    ref = spec.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return spec
    target: Any = schema
    for part in ref[2:].split("/"):
        target = target[part]
    return _resolve(target, schema)


def _types(spec: Mapping[str, Any]) -> set[str]:
    kind = spec.get("type", [])
    return {kind} if isinstance(kind, str) else set(kind)


def _from_text(value: str, spec: Mapping[str, Any]) -> Any:
    """A command-line string as the typed value the schema asks for, where YAML reads it so."""
    types = _types(spec)
    if types == {"array"}:
        return [value]  # labels=_gpu_: a list of one
    if "string" in types or not types & _TYPED.keys():
        return value
    try:
        typed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    wanted = tuple(_TYPED[t] for t in types if t in _TYPED)
    if isinstance(typed, bool) and "boolean" not in types:
        return value  # "yes" is not a number
    return typed if isinstance(typed, wanted) else value


def coerce_typed(value: Any, spec: Mapping[str, Any], schema: Mapping[str, Any]) -> Any:
    """``value`` with every string that the schema types as boolean, number or null read as YAML.

    Objects and arrays are walked, so numbers inside ``overrides`` given on the
    command line count as numbers; a string that is no such value stays a string
    and the schema names it.
    """
    spec = _resolve(spec, schema)
    if isinstance(value, str):
        return _from_text(value, spec)
    if isinstance(value, Mapping):
        properties = spec.get("properties", {})
        extra = spec.get("additionalProperties")
        out = {}
        for key, item in value.items():
            item_spec = properties.get(key, extra if isinstance(extra, Mapping) else {})
            out[key] = coerce_typed(item, item_spec, schema)
        return out
    if isinstance(value, list) and isinstance(spec.get("items"), Mapping):
        return [coerce_typed(item, spec["items"], schema) for item in value]
    return value


def validate_config(
    config: MutableMapping[str, Any], schema_path: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
) -> None:
    """Read command-line strings by their schema type, check ``config`` against the YAML JSON
    schema (default: the packaged one), then fill top-level defaults, all in place;
    :class:`ConfigError` lists every problem, one line each. ``cache``: a file that remembers the
    configs found valid against this schema (only a shortcut: a config not in it is checked)."""
    text = _schema_text(schema_path)
    schema = _load_yaml(text)
    config.update(coerce_typed(dict(config), schema, schema))
    key = hashlib.sha256(f"{text}\0{json.dumps(dict(config), sort_keys=True, default=repr)}".encode()).hexdigest()
    known = _remembered(cache)
    if key not in known:
        import jsonschema

        validator = jsonschema.Draft7Validator(schema)
        errors = sorted(validator.iter_errors(dict(config)), key=lambda e: list(map(str, e.absolute_path)))
        if errors:
            raise invalid_config([f"{_where(e)}: {e.message}" for e in errors])
        _remember(cache, [*[k for k in known if k != key][-(_REMEMBERED - 1):], key])
    for key, spec in schema.get("properties", {}).items():
        if key not in config and "default" in spec:
            config[key] = spec["default"]


def _remembered(cache: str | os.PathLike[str] | None) -> list[str]:
    if cache is None:
        return []
    try:
        keys = json.loads(Path(cache).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []


def _remember(cache: str | os.PathLike[str] | None, keys: list[str]) -> None:
    if cache is None:
        return
    try:
        write_text(cache, json.dumps(keys) + "\n")
    except OSError:
        pass  # a read-only working directory: only slower next time


def invalid_config(problems: list[str], heading: str = "invalid config") -> ConfigError:
    """One error for a config's (or a results folder's) problems: a heading, then one indented line each."""
    return ConfigError(f"{heading}:\n" + "\n".join(f"  {p}" for p in problems))
