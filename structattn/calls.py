"""Call-like specs: ``"window(radius=3)"``, ``"soft_bias(dependency, max_distance=8)"``, ``"full"``.

This module sits at the bottom of the package (it imports nothing of structattn), so every layer may parse
specs: providers, tasks, attention plans and probe steps all use it.

Configs name providers, tasks and attention variants with the syntax of a Python call whose arguments are
literals (or bare identifiers for a structure name), parsed with :mod:`ast` (never evaluated).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CallSpec:
    """``name(positional..., key=value...)`` with literal arguments.

    Attributes:
        name: the registry name (``"soft_bias"``).
        args: positional arguments; a bare identifier is kept as a string (``dependency`` -> ``"dependency"``).
        options: keyword arguments (Python literals).
    """

    name: str
    args: tuple[Any, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        parts = [str(a) if isinstance(a, str) and a.isidentifier() else repr(a) for a in self.args]
        parts += [f"{k}={v!r}" for k, v in self.options.items()]
        return f"{self.name}({', '.join(parts)})" if parts else self.name


def parse_call(text: str, what: str = "spec") -> CallSpec:
    """Parse ``text`` (see module docstring). Raises ``ValueError`` naming ``what`` and the text."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"{what} {text!r} is not of the form name or name(arg, key=value)") from None
    return call_from_node(node, text, what)


def call_from_node(node: ast.AST, text: str, what: str) -> CallSpec:
    """A :class:`CallSpec` from an already-parsed expression node (a ``Name`` or a ``Call``)."""
    if isinstance(node, ast.Name):
        return CallSpec(node.id)
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"{what} {text!r} is not of the form name or name(arg, key=value)")
    args = tuple(_literal(a, text, what) for a in node.args)
    options = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError(f"{what} {text!r}: '**' is not allowed")
        options[kw.arg] = _literal(kw.value, text, what)
    return CallSpec(node.func.id, args, options)


def _literal(node: ast.AST, text: str, what: str) -> Any:
    if isinstance(node, ast.Name):
        return node.id
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"{what} {text!r}: argument {ast.unparse(node)!r} is not a literal") from None
