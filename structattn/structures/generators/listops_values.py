"""ListOps values: the operators' definitions, a tree evaluator and a token-stream evaluator.

Values: ``MIN``/``MAX`` as named; ``MED`` the median, the floor of the mean of the two middle values for an
even count (``int(numpy.median(args))``); ``SM`` the sum modulo 10. Every value is a digit.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

OPERATORS = ("MIN", "MAX", "MED", "SM")
#: An expression: (operator, arguments), an argument being a digit or an expression.
Expr = tuple[str, list[Union[int, "Expr"]]]


def apply_operator(op: str, args: Sequence[int]) -> int:
    """Value of ``op`` on ``args`` (see the module docstring)."""
    if op == "MIN":
        return min(args)
    if op == "MAX":
        return max(args)
    if op == "SM":
        return sum(args) % 10
    if op == "MED":
        s, m = sorted(args), len(args)
        return s[m // 2] if m % 2 else (s[m // 2 - 1] + s[m // 2]) // 2
    raise ValueError(f"unknown ListOps operator {op!r}; known: {OPERATORS}")


def evaluate_listops(words: Sequence[str]) -> int:
    """Value of a tokenised expression; ``ValueError`` naming the token when it is malformed."""
    stack: list[tuple[str, list[int]]] = []
    result: Optional[int] = None
    for i, w in enumerate(words):
        if result is not None:
            raise ValueError(f"ListOps: token {i} ({w!r}) after the end of the expression")
        if w.startswith("[") and w[1:] in OPERATORS:
            stack.append((w[1:], []))
        elif w.isdigit() and len(w) == 1 and stack:
            stack[-1][1].append(int(w))
        elif w == "]" and stack and stack[-1][1]:
            op, args = stack.pop()
            value = apply_operator(op, args)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        else:
            raise ValueError(f"ListOps: unexpected token {i} ({w!r})")
    if result is None:
        raise ValueError(f"ListOps: expression of {len(words)} tokens is not closed")
    return result


def expression_value(tree: Expr) -> int:
    """Value of an expression tree (bottom-up)."""
    op, args = tree
    return apply_operator(op, [a if isinstance(a, int) else expression_value(a) for a in args])


def expression_depth(tree: Expr) -> int:
    """Operator nesting depth (1: only digit arguments)."""
    return 1 + max((expression_depth(a) for a in tree[1] if not isinstance(a, int)), default=0)
