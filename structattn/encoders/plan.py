"""Per-layer attention plans: which variant each layer (and each group of heads) uses, on which structure.

A plan is written as text, one segment per group of layers, separated by ``;``::

    "full"                                          every layer: full attention
    "soft_bias(dependency)"                         every layer: soft_bias on the dependency structure
    "soft_bias(dependency)@0-2; full"               layers 0-2 soft_bias, the other layers full
    "ssan(dependency)@0; full"                      ssan in layer 0 only
    "hard_mask(dependency)*4 + full*4"              in every layer 4 heads masked by the tree, 4 heads full
    "soft_bias(dependency, max_distance=8)@1,3; full"   variant options as keywords

A segment is ``group (+ group)* [@ layers]``; a group is ``variant[(structure, key=value, ...)][*heads]``;
layers are ``i``, ``i-j`` or comma lists. A segment without ``@`` covers every layer no other segment
names (at most one such segment). Inside a layer, groups without ``*heads`` share the remaining heads.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from structattn.calls import call_from_node


@dataclass(frozen=True)
class HeadGroup:
    """Some heads of one layer, attending with ``variant`` over structure ``structure`` (``None``: none).

    Attributes:
        variant: attention registry name.
        structure: name of the structure (a key of the batch's ``structures``) or ``None``.
        num_heads: heads of this group.
        options: the variant's own constructor options.
    """

    variant: str
    structure: str | None
    num_heads: int
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``variant`` or ``variant(structure)``, used in plots and messages."""
        return f"{self.variant}({self.structure})" if self.structure else self.variant


def parse_plan(text: str, num_layers: int, num_heads: int) -> list[list[HeadGroup]]:
    """The head groups of every layer.

    Returns:
        ``plan[layer]`` is the list of :class:`HeadGroup` of that layer; their ``num_heads`` sum to
        ``num_heads``.

    Raises:
        ValueError: on a syntax error, a layer outside ``0..num_layers-1``, a layer named twice, layers
            left without attention, or head counts that do not add up; the message quotes the plan.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"attention plan must be a non-empty string, got {text!r}")
    plan: list[list[HeadGroup] | None] = [None] * num_layers
    default: list[HeadGroup] | None = None
    for segment in (s.strip() for s in text.split(";")):
        if not segment:
            continue
        groups_text, at, layers_text = segment.partition("@")
        groups = _parse_groups(groups_text, num_heads, text)
        if not at:
            if default is not None:
                raise ValueError(f"attention plan {text!r}: more than one segment without '@layers'")
            default = groups
            continue
        for layer in _parse_layers(layers_text, num_layers, text):
            if plan[layer] is not None:
                raise ValueError(f"attention plan {text!r}: layer {layer} is named twice")
            plan[layer] = groups
    missing = [i for i, groups in enumerate(plan) if groups is None]
    if missing and default is None:
        raise ValueError(f"attention plan {text!r} leaves layers {missing} without attention; add e.g. '; full'")
    return [groups if groups is not None else list(default) for groups in plan]  # type: ignore[arg-type]


def _parse_layers(text: str, num_layers: int, plan: str) -> list[int]:
    layers: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        first, dash, last = part.partition("-")
        try:
            lo, hi = int(first), int(last) if dash else int(first)
        except ValueError:
            raise ValueError(f"attention plan {plan!r}: bad layer range {part!r} (use i, i-j or i,j)") from None
        if not 0 <= lo <= hi < num_layers:
            raise ValueError(f"attention plan {plan!r}: layers {part!r} outside 0..{num_layers - 1} ({num_layers} layers)")
        layers.extend(range(lo, hi + 1))
    return layers


def _parse_groups(text: str, num_heads: int, plan: str) -> list[HeadGroup]:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"attention plan {plan!r}: cannot parse {text.strip()!r}") from None
    terms: list[ast.AST] = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        terms.insert(0, node.right)
        node = node.left
    terms.insert(0, node)
    raw = [_parse_term(t, plan) for t in terms]
    fixed = sum(h for _, h in raw if h is not None)
    free = [k for k, (_, h) in enumerate(raw) if h is None]
    left = num_heads - fixed
    if left < 0 or (free and left < len(free)) or (not free and left != 0):
        raise ValueError(f"attention plan {plan!r}: head counts in {text.strip()!r} do not add up to {num_heads} heads")
    groups = []
    for k, (call, heads) in enumerate(raw):
        if heads is None:
            share, extra = divmod(left, len(free))
            heads = share + (1 if free.index(k) < extra else 0)
        if len(call.args) > 1:
            raise ValueError(f"attention plan {plan!r}: {call} takes at most one structure name")
        structure = call.args[0] if call.args else None
        if structure is not None and not isinstance(structure, str):
            raise ValueError(f"attention plan {plan!r}: structure name must be a name, got {structure!r}")
        groups.append(HeadGroup(call.name, structure, heads, dict(call.options)))
    return groups


def _parse_term(node: ast.AST, plan: str) -> tuple[Any, int | None]:
    heads = None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        if not isinstance(node.right, ast.Constant) or not isinstance(node.right.value, int) or node.right.value < 1:
            raise ValueError(f"attention plan {plan!r}: '*' must be followed by a positive head count")
        node, heads = node.left, node.right.value
    return call_from_node(node, ast.unparse(node), f"attention plan {plan!r}: group"), heads
