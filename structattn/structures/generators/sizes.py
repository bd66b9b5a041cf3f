"""Which token counts a ListOps expression can have, by nesting depth (exact, as bit sets).

An operator node of depth ``d`` spends two tokens (``[OP`` and ``]``) and takes ``2..max_args`` arguments,
each a digit (1 token) or an expression of depth ``< d``. Some small sizes are impossible (with
``max_args=3`` no expression has 6 tokens), so the generator asks this table instead of guessing.
Bit ``s`` of an ``int`` mask is set when size ``s`` is possible; sizes above ``cap`` are not tracked.
"""

from __future__ import annotations

import re
from functools import reduce
from operator import or_


def _runs(mask: int) -> list[tuple[int, int]]:
    """Maximal runs ``[a, b]`` of set bits."""
    bits = bin(mask)[2:][::-1]
    return [(m.start(), m.end() - 1) for m in re.finditer("1+", bits)]


def sumset(x: int, u: int) -> int:
    """Bit set of ``{p + q : p in x, q in u}`` (shift-or over runs of ``u``, doubling inside a run)."""
    out = 0
    for a, b in _runs(u):
        span, covered, y = b - a + 1, 1, x
        while covered < span:
            step = min(covered, span - covered)
            y |= y << step
            covered += step
        out |= y << a
    return out


class ExpressionSizes:
    """Possible sizes (token counts) of expressions and of argument lists, for every depth up to ``max_depth``.

    Args:
        max_depth: deepest operator nesting (1: an operator whose arguments are all digits).
        max_args: most arguments per operator (at least 2).
        cap: largest size tracked.
    """

    def __init__(self, max_depth: int, max_args: int, cap: int) -> None:
        self.cap = cap
        limit = (1 << (cap + 1)) - 1
        self.sizes = [0]  # sizes[d]: expressions of depth <= d (none of depth 0)
        self.sums: list[list[int]] = [[]]  # sums[d][m]: total size of m arguments of a depth-d operator
        for depth in range(1, max_depth + 1):
            unit = 0b10 | self.sizes[depth - 1]  # a digit, or a shallower expression
            sums = [1]
            for _ in range(max_args):
                sums.append(sumset(sums[-1], unit) & limit)
            self.sums.append(sums)
            self.sizes.append(reduce(or_, (s << 2 for s in sums[2:])) & limit)

    def has(self, depth: int, size: int) -> bool:
        """Whether an expression of depth <= ``depth`` can have ``size`` tokens."""
        return 0 <= size <= self.cap and bool(self.sizes[depth] >> size & 1)

    def fits(self, depth: int, num_args: int, total: int) -> bool:
        """Whether ``num_args`` arguments of a depth-``depth`` operator can take ``total`` tokens together."""
        return 0 <= total <= self.cap and bool(self.sums[depth][num_args] >> total & 1)

    def nearest(self, depth: int, size: int) -> int | None:
        """The possible size closest to ``size`` (the smaller on ties), or ``None`` when there is none."""
        for delta in range(0, self.cap + 1):
            for candidate in (size - delta, size + delta):
                if self.has(depth, candidate):
                    return candidate
        return None
