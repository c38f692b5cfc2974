"""Reading a JSON file of the contract: the one place that turns its failures into one line; and the test of a
value every such file counts or times with."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from embprof.errors import ContractError


def read_json(path: str | os.PathLike[str]) -> Any:
    """The parsed file; :class:`ContractError` when it is missing, unreadable or not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ContractError(f"{path}: no such file") from None
    except OSError as exc:
        raise ContractError(f"{path}: cannot read: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ContractError(f"{path}: not valid JSON ({exc})") from None


def read_object(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """A file that must hold one JSON object (``what`` names it in the error)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise ContractError(f"{path}: expected {what} (a JSON object), got {type(data).__name__}")
    return data


def is_non_negative(value: Any) -> bool:
    """A finite number >= 0 as JSON gives it (a boolean is not one): a count, a size or a time in a file."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
