"""The bytes-moved table (``bandwidth.yaml``; default in package data), loaded and checked once.

Every formula is parsed, every name it reads is checked against the variables
defined before it, every regex is compiled, at load time: a typo in the table
is reported when the table is read, with the rule that holds it, not as a
blank column in a report later.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema

from embprof.bandwidth.expr import Formula, parse_formula
from embprof.defaults import BANDWIDTH_TABLE, default_file, read_yaml
from embprof.errors import ConfigError, ContractError, FormulaError

if TYPE_CHECKING:  # the peak step runs where pandas may not be installed (envs/benchmark.yaml)
    import numpy as np
    import pandas as pd

DEFAULT_TABLE = default_file(BANDWIDTH_TABLE)
BACKENDS = ("dyn", "trc", "any")

_NUMBER_OR_FORMULA = {"anyOf": [{"type": "number"}, {"type": "string", "minLength": 1}]}
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["version", "record_fields", "choice_fields", "variables", "ops"],
    "additionalProperties": False,
    "properties": {
        "version": {"const": 1},
        "record_fields": {
            "type": "object",
            "additionalProperties": {"type": "string", "minLength": 1},
        },
        "choice_fields": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["field"],
                "additionalProperties": False,
                "properties": {
                    "field": {"type": "string", "minLength": 1},
                    "aliases": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
        },
        "variables": {
            "type": "object",
            "additionalProperties": {
                "anyOf": [
                    _NUMBER_OR_FORMULA,
                    {
                        "type": "object",
                        "required": ["by", "cases"],
                        "additionalProperties": False,
                        "properties": {
                            "by": {"type": "string"},
                            "cases": {
                                "type": "object",
                                "minProperties": 1,
                                "additionalProperties": _NUMBER_OR_FORMULA,
                            },
                        },
                    },
                ]
            },
        },
        "ops": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["backend", "bytes", "moves"],
                "anyOf": [{"required": ["ops"]}, {"required": ["op_regex"]}],
                "additionalProperties": False,
                "properties": {
                    "backend": {"enum": list(BACKENDS)},
                    "phase": {"enum": ["forward", "backward"]},
                    "ops": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "op_regex": {"type": "string", "minLength": 1},
                    "bytes": {"type": "string", "minLength": 1},
                    "moves": {"type": "string", "minLength": 1},
                },
            },
        },
        "without_formula": {"type": "object", "additionalProperties": {"type": "string"}},
        "datasheet_peak_gbps": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["pattern", "gbps", "note"],
                "additionalProperties": False,
                "properties": {
                    "pattern": {"type": "string", "minLength": 1},
                    "gbps": {"type": "number", "exclusiveMinimum": 0},
                    "note": {"type": "string"},
                },
            },
        },
    },
}


@dataclass(frozen=True)
class Choice:
    """A text field of the record (optimizer, pooling) normalized to the table's spelling."""

    field: str
    aliases: Mapping[str, str]

    def normalize(self, value: object) -> str | None:
        if not isinstance(value, str) or not value:
            return None
        key = value.rsplit(".", 1)[-1].strip().lower()
        return self.aliases.get(key, key)


@dataclass(frozen=True)
class Variable:
    """A named quantity: one formula, or one formula per case of a choice field."""

    name: str
    formula: Formula | None = None
    by: str | None = None
    cases: Mapping[str, Formula] = field(default_factory=dict)


@dataclass(frozen=True)
class Rule:
    """Which rows of the per-op CSV one bytes formula describes."""

    name: str
    backend: str
    phase: str | None
    ops: frozenset[str]
    op_regex: re.Pattern[str] | None
    bytes: Formula
    moves: str

    def matches(self, rows: pd.DataFrame) -> np.ndarray:
        """Boolean mask over ``rows`` (columns backend, phase, op)."""
        op = rows["op"].astype(str).str.removeprefix("op:")
        hit = op.isin(self.ops)
        if (pattern := self.op_regex) is not None:
            hit |= op.map(lambda name: pattern.search(name) is not None).astype(bool)
        if self.backend != "any":
            hit &= rows["backend"] == self.backend
        if self.phase is not None:
            hit &= rows["phase"] == self.phase
        return hit.to_numpy(dtype=bool)

    @property
    def label(self) -> str:
        return f"{self.name}: {self.bytes.text}"


@dataclass(frozen=True)
class DatasheetEntry:
    pattern: re.Pattern[str]
    gbps: float
    note: str


@dataclass(frozen=True)
class BandwidthTable:
    record_fields: Mapping[str, str]
    choices: Mapping[str, Choice]
    variables: tuple[Variable, ...]
    rules: tuple[Rule, ...]
    without_formula: Mapping[str, str]
    datasheet: tuple[DatasheetEntry, ...]

    def variables_for(self, record: Mapping[str, Any]) -> tuple[dict[str, float], list[str]]:
        """Every variable's value for one config, and why any could not be defined.

        A record field that is missing or not a number is an error (the record is
        broken); a choice the table has no case for (an optimizer it does not
        model) leaves that variable, and every formula reading it, undefined.
        """
        values: dict[str, float] = {}
        for name, key in self.record_fields.items():
            raw = record.get(key)
            if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
                raise ContractError(
                    f"record field {key!r} (variable {name}) must be a finite number, got {raw!r}"
                )
            values[name] = float(raw)
        chosen = {name: c.normalize(record.get(c.field)) for name, c in self.choices.items()}
        notes: list[str] = []
        for var in self.variables:
            if var.by is None:
                formula = var.formula
            else:
                choice = chosen[var.by]
                formula = var.cases.get(choice) if choice is not None else None
            if formula is None:
                field_name = self.choices[var.by].field if var.by else "?"
                notes.append(
                    f"{var.name} undefined: {field_name}={record.get(field_name)!r} has no case"
                    f" (known: {', '.join(var.cases)})"
                )
                continue
            if formula.names - values.keys():
                notes.append(
                    f"{var.name} undefined: needs {', '.join(sorted(formula.names - values.keys()))}"
                )
                continue
            try:
                values[var.name] = float(formula(values))
            except FormulaError as exc:
                notes.append(f"{var.name} undefined: {exc}")
        return values, notes

    def datasheet_peak(self, device_name: str) -> DatasheetEntry | None:
        """The first datasheet entry whose pattern matches ``device_name``."""
        for entry in self.datasheet:
            if entry.pattern.search(device_name):
                return entry
        return None


def load_table(path: Path | str = DEFAULT_TABLE) -> BandwidthTable:
    """Read and check the table; ``ConfigError`` says what is wrong and where."""
    path = Path(path)
    raw = read_yaml(path, "a bandwidth table")
    try:
        jsonschema.validate(raw, _SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: at {where}: {exc.message}") from None
    try:
        return _build(raw)
    except (FormulaError, re.error, ConfigError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _build(raw: Mapping[str, Any]) -> BandwidthTable:
    record_fields = dict(raw["record_fields"])
    choices = {
        name: Choice(
            field=spec["field"],
            aliases={k.lower(): v.lower() for k, v in spec.get("aliases", {}).items()},
        )
        for name, spec in raw["choice_fields"].items()
    }
    defined = set(record_fields)
    variables: list[Variable] = []
    for name, spec in raw["variables"].items():
        if name in defined:
            raise ConfigError(f"variable {name!r} is defined twice")
        if isinstance(spec, Mapping):
            if spec["by"] not in choices:
                raise ConfigError(
                    f"variable {name!r}: by: {spec['by']!r} is not a choice field ({', '.join(choices)})"
                )
            cases = {str(k).lower(): _formula(v, name, defined) for k, v in spec["cases"].items()}
            variables.append(Variable(name=name, by=spec["by"], cases=cases))
        else:
            variables.append(Variable(name=name, formula=_formula(spec, name, defined)))
        defined.add(name)
    rules = tuple(
        Rule(
            name=name,
            backend=spec["backend"],
            phase=spec.get("phase"),
            ops=frozenset(spec.get("ops", ())),
            op_regex=re.compile(spec["op_regex"]) if "op_regex" in spec else None,
            bytes=_formula(spec["bytes"], f"ops/{name}", defined),
            moves=spec["moves"],
        )
        for name, spec in raw["ops"].items()
    )
    datasheet = tuple(
        DatasheetEntry(
            pattern=re.compile(e["pattern"], re.IGNORECASE), gbps=float(e["gbps"]), note=e["note"]
        )
        for e in raw.get("datasheet_peak_gbps", ())
    )
    return BandwidthTable(
        record_fields=record_fields,
        choices=choices,
        variables=tuple(variables),
        rules=rules,
        without_formula=dict(raw.get("without_formula", {})),
        datasheet=datasheet,
    )


def _formula(spec: int | float | str, where: str, defined: set[str]) -> Formula:
    formula = parse_formula(str(spec))
    unknown = sorted(formula.names - defined)
    if unknown:
        raise ConfigError(
            f"{where}: formula {formula.text!r} reads undefined name(s): {', '.join(unknown)}"
        )
    return formula
