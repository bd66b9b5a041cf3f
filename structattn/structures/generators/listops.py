"""``ListOpsGenerator``: nested list operations with gold trees (Nangia & Bowman 2018, "ListOps").

Tokenisation (one word per token): an operator opens with ``[MIN``, ``[MAX``, ``[MED`` or ``[SM``, its
arguments follow (digits ``0``-``9`` or nested expressions), and ``]`` closes it::

    [MAX 2 9 [MIN 4 7 ] 0 ]        value 9

Values (see :mod:`~structattn.structures.generators.listops_values`): ``MIN``, ``MAX``, ``MED`` (median,
floored for an even count) and ``SM`` (sum modulo 10).

Gold structure: the operator token heads its arguments (``arg``: digits and nested operator tokens) and its
closing bracket (``punct``); the outermost operator is the root. ``constituency`` brackets each expression
under its operator name with preterminals ``OP``, ``NUM``, ``CL``: ``(MAX (OP [MAX) (NUM 2) (CL ]))``.
"""

from __future__ import annotations

import random
from typing import Optional

from structattn.structures.generators.listops_values import (
    OPERATORS, Expr, evaluate_listops, expression_depth, expression_value,
)
from structattn.structures.generators.sizes import ExpressionSizes
from structattn.structures.sentence import Sentence

__all__ = ["ListOpsGenerator", "evaluate_listops"]


class ListOpsGenerator:
    """Random ListOps expressions as :class:`Sentence` objects, deterministic given ``seed``.

    Args:
        seed: seed of the generator's own ``random.Random``.
        max_depth: deepest operator nesting (>= 1).
        max_args: most arguments per operator (>= 2; each operator takes 2..max_args).
        min_length, max_length: when set, :meth:`example` draws its length (tokens) uniformly among the
            possible lengths in ``[min_length, max_length]`` (``min_length`` defaults to 4).
        p_nest: without a length, the chance that an argument is a nested expression.

    ``meta``: ``value`` (0-9), ``depth``, ``generator``, ``seed``. ``label_scheme`` is ``"listops"``.
    """

    def __init__(
        self, seed: int, max_depth: int = 10, max_args: int = 5, min_length: Optional[int] = None,
        max_length: Optional[int] = None, p_nest: float = 0.25,
    ) -> None:
        if max_depth < 1 or max_args < 2:
            raise ValueError(f"ListOpsGenerator: need max_depth >= 1 and max_args >= 2, got {max_depth}, {max_args}")
        if not 0.0 <= p_nest < 1.0:
            raise ValueError(f"ListOpsGenerator: p_nest={p_nest!r} must lie in [0, 1)")
        if min_length is not None and max_length is None:
            raise ValueError(f"ListOpsGenerator: min_length={min_length} needs a max_length")
        self.seed, self.max_depth, self.max_args, self.p_nest = seed, max_depth, max_args, p_nest
        self.rng = random.Random(seed)
        self._sizes = ExpressionSizes(max_depth, max_args, cap=max(64, max_length or 0))
        self._count = 0
        self._lengths: list[int] = []
        if max_length is not None:
            low = 4 if min_length is None else min_length
            self._lengths = [s for s in range(low, max_length + 1) if self._sizes.has(max_depth, s)]
            if not self._lengths:
                raise ValueError(
                    f"ListOpsGenerator: no expression of depth <= {max_depth} with <= {max_args} arguments per "
                    f"operator has between {low} and {max_length} tokens"
                )

    def max_possible_length(self) -> int:
        """Tokens of the largest expression allowed by ``max_depth`` and ``max_args``."""
        size = 0
        for _ in range(self.max_depth):
            size = 2 + self.max_args * max(size, 1)
        return size

    def example(self, length: Optional[int] = None) -> Sentence:
        """One expression; ``length`` (tokens) is met exactly, or by the nearest possible length."""
        if length is None and self._lengths:
            length = self.rng.choice(self._lengths)
        if length is None:
            tree = self._free(self.max_depth)
        else:
            tree = self._sized(self._possible(length), self.max_depth)
        self._count += 1
        return self._sentence(tree, f"listops{self.seed}-{self._count}")

    def examples(self, k: int, length: Optional[int] = None) -> list[Sentence]:
        """``k`` expressions (see :meth:`example`)."""
        return [self.example(length) for _ in range(k)]

    def _possible(self, length: int) -> int:
        if not 4 <= length <= self.max_possible_length():
            raise ValueError(
                f"ListOpsGenerator: length {length} is impossible: expressions have 4..{self.max_possible_length()} "
                f"tokens with max_depth={self.max_depth}, max_args={self.max_args}"
            )
        if length > self._sizes.cap:
            self._sizes = ExpressionSizes(self.max_depth, self.max_args, cap=2 * length)
        nearest = self._sizes.nearest(self.max_depth, length)
        assert nearest is not None  # 4 <= length <= max possible, so some size lies near
        return nearest

    def _free(self, depth: int) -> Expr:
        args: list = [
            self._free(depth - 1) if depth > 1 and self.rng.random() < self.p_nest else self.rng.randrange(10)
            for _ in range(self.rng.randint(2, self.max_args))
        ]
        return (self.rng.choice(OPERATORS), args)

    def _sized(self, size: int, depth: int) -> Expr:
        """An expression of exactly ``size`` tokens and depth <= ``depth`` (``size`` must be possible)."""
        remaining = size - 2
        num_args = self.rng.choice([k for k in range(2, self.max_args + 1) if self._sizes.fits(depth, k, remaining)])
        args: list = []
        for left in range(num_args, 0, -1):
            part = self._part(depth, left, remaining)
            args.append(self.rng.randrange(10) if part == 1 else self._sized(part, depth - 1))
            remaining -= part
        self.rng.shuffle(args)
        return (self.rng.choice(OPERATORS), args)

    def _part(self, depth: int, left: int, remaining: int) -> int:
        """Size of the next of ``left`` arguments sharing ``remaining`` tokens."""
        if left == 1:
            return remaining

        def ok(part: int) -> bool:
            possible = part == 1 or self._sizes.has(depth - 1, part)
            return possible and self._sizes.fits(depth, left - 1, remaining - part)

        if self.rng.random() < 0.5 and ok(1):
            return 1
        for _ in range(8):
            part = self.rng.randint(4, max(4, remaining - left + 1))
            if ok(part):
                return part
        return self.rng.choice([p for p in range(1, remaining + 1) if ok(p)])

    def _sentence(self, tree: Expr, sentence_id: str) -> Sentence:
        words: list[str] = []
        heads: list[int] = []
        deprels: list[str] = []
        upos: list[str] = []

        def emit(word: str, head: int, deprel: str, tag: str) -> int:
            for column, value in ((words, word), (heads, head), (deprels, deprel), (upos, tag)):
                column.append(value)
            return len(words) - 1

        def walk(node: Expr, parent: int) -> str:
            op, args = node
            me = emit(f"[{op}", parent, "root" if parent < 0 else "arg", "SYM")
            parts = [f"(OP [{op})"]
            for a in args:
                if isinstance(a, int):
                    emit(str(a), me, "arg", "NUM")
                    parts.append(f"(NUM {a})")
                else:
                    parts.append(walk(a, me))
            emit("]", me, "punct", "PUNCT")
            return f"({op} " + " ".join(parts) + " (CL ]))"

        constituency = walk(tree, -1)
        meta = {"value": expression_value(tree), "depth": expression_depth(tree), "generator": "listops", "seed": self.seed}
        return Sentence(
            words=words, heads=heads, deprels=deprels, upos=upos, constituency=constituency,
            id=sentence_id, label_scheme="listops", meta=meta,
        )
