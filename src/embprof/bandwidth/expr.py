"""A small, safe arithmetic language for the bytes-moved formulas.

Formulas live in ``config/bandwidth.yaml`` where anyone can edit them, so they
are never handed to Python's ``eval``: the text is parsed with :mod:`ast`
(parsing executes nothing) and only a white-list of nodes is accepted and
interpreted here. Numbers, named variables, ``+ - * / // % **``, unary minus,
parentheses and ``min``/``max`` are all a bytes formula needs. Variables may be
scalars or numpy arrays, so one formula evaluates many configs at once.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from embprof.errors import FormulaError

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": lambda *a: _fold(np.minimum, a),
    "max": lambda *a: _fold(np.maximum, a),
}


def _fold(fn: Callable[[Any, Any], Any], args: tuple[Any, ...]) -> Any:
    out = args[0]
    for value in args[1:]:
        out = fn(out, value)
    return out


@dataclass(frozen=True)
class Formula:
    """One parsed expression; ``names`` are the variables it reads."""

    text: str
    names: frozenset[str]
    _tree: ast.expr

    def __call__(self, variables: Mapping[str, Any]) -> Any:
        missing = sorted(self.names - variables.keys())
        if missing:
            raise FormulaError(
                f"formula {self.text!r} needs undefined variable(s): {', '.join(missing)}"
            )
        try:
            with np.errstate(divide="raise", invalid="raise"):
                return _evaluate(self._tree, variables)
        except (ZeroDivisionError, FloatingPointError) as exc:
            raise FormulaError(f"formula {self.text!r}: division by zero") from exc


def parse_formula(text: str) -> Formula:
    """Parse and check ``text``; ``FormulaError`` names the first construct that is not allowed."""
    if not isinstance(text, str) or not text.strip():
        raise FormulaError(f"a formula must be a non-empty string, got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise FormulaError(f"formula {text!r} is not an expression: {exc.msg}") from None
    names: set[str] = set()
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        _check_node(node, text, names)
        if isinstance(node, ast.Name) and node.id in _FUNCTIONS and id(node) not in called:
            raise FormulaError(f"formula {text!r}: {node.id!r} is a function, not a variable")
    return Formula(text=text.strip(), names=frozenset(names), _tree=tree)


def _check_node(node: ast.AST, text: str, names: set[str]) -> None:
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise FormulaError(
                f"formula {text!r}: operator {type(node.op).__name__} is not allowed"
            )
    elif isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise FormulaError(
                f"formula {text!r}: operator {type(node.op).__name__} is not allowed"
            )
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise FormulaError(f"formula {text!r}: only numbers are allowed, not {node.value!r}")
    elif isinstance(node, ast.Name):
        if node.id not in _FUNCTIONS:
            names.add(node.id)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise FormulaError(f"formula {text!r}: only {sorted(_FUNCTIONS)} may be called")
        if node.keywords or not node.args:
            raise FormulaError(
                f"formula {text!r}: {node.func.id}() takes positional arguments only"
            )
    elif not isinstance(node, ast.operator | ast.unaryop | ast.expr_context):
        raise FormulaError(f"formula {text!r}: {type(node).__name__} is not allowed")


def _evaluate(node: ast.expr, variables: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return variables[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](
            _evaluate(node.left, variables), _evaluate(node.right, variables)
        )
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand, variables))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _FUNCTIONS[node.func.id](*(_evaluate(a, variables) for a in node.args))
    raise FormulaError(f"unexpected node {type(node).__name__}")
