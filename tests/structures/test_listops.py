"""ListOpsGenerator: values checked by an independent evaluator, gold trees against the bracket structure
(networkx oracle), exact length control, and the size table against brute-force enumeration."""

from __future__ import annotations

import math
import statistics
from itertools import product

import networkx as nx
import pytest

from structattn.structures import ListOpsGenerator, Sentence
from structattn.structures.generators import evaluate_listops
from structattn.structures.generators.sizes import ExpressionSizes
from tests.structures._brackets import phrase_spans, preterminals, read_brackets

DEFINITIONS = {
    "MIN": min,
    "MAX": max,
    "MED": lambda xs: math.floor(statistics.median(xs)),
    "SM": lambda xs: sum(xs) % 10,
}


def reference_value_and_heads(words: list[str]) -> tuple[int, list[int], int]:
    """Value, expected heads and depth from the tokens alone (stack of open operators)."""
    stack: list[tuple[int, str, list[int]]] = []  # (token index, operator, argument values)
    heads, value, depth = [], None, 0
    for i, w in enumerate(words):
        heads.append(stack[-1][0] if stack else -1)
        if w.startswith("["):
            stack.append((i, w[1:], []))
            depth = max(depth, len(stack))
        elif w == "]":
            index, op, args = stack.pop()
            heads[-1] = index
            result = DEFINITIONS[op](args)
            if stack:
                stack[-1][2].append(result)
            else:
                value = result
        else:
            stack[-1][2].append(int(w))
    assert not stack and value is not None
    return value, heads, depth


def examples() -> list[Sentence]:
    out = []
    for seed in range(20):
        gen = ListOpsGenerator(seed, max_depth=4, max_args=4)
        out += gen.examples(10) + gen.examples(3, length=60 + seed)
    return out


def check_example(s: Sentence, max_depth: int) -> None:
    value, heads, depth = reference_value_and_heads(s.words)
    assert s.meta["value"] == value and 0 <= value <= 9
    assert list(s.heads) == heads and s.meta["depth"] == depth <= max_depth
    g = nx.DiGraph((h, i) for i, h in enumerate(s.heads) if h >= 0)
    g.add_nodes_from(range(len(s)))
    assert nx.is_arborescence(g)
    tree = read_brackets(s.constituency)
    assert [w for _, w in preterminals(tree)] == list(s.words)
    for label, start, end in phrase_spans(tree):
        assert s.words[start] == f"[{label}" and s.words[end - 1] == "]"
        assert s.heads[end - 1] == start and not start <= s.heads[start] < end


def test_values_heads_and_constituency_match_an_independent_reading():
    sample = examples()
    assert {s.meta["value"] for s in sample} == set(range(10))
    assert {w for s in sample for w in s.words if w.startswith("[")} == {"[MIN", "[MAX", "[MED", "[SM"}
    for s in sample:
        check_example(s, max_depth=4)


def test_literal_expression_and_median_definition():
    assert evaluate_listops("[MAX 2 9 [MIN 4 7 ] 0 ]".split()) == 9
    assert evaluate_listops("[MED 1 2 3 4 ]".split()) == 2  # floor of 2.5
    assert evaluate_listops("[SM 9 [MED 7 1 5 ] 3 ]".split()) == 7
    with pytest.raises(ValueError, match="token 2"):
        evaluate_listops("[MAX 2 ( ]".split())
    with pytest.raises(ValueError, match="not closed"):
        evaluate_listops("[MAX 2 3".split())


def test_same_seed_same_examples():
    a, b = ListOpsGenerator(3, min_length=20, max_length=80), ListOpsGenerator(3, min_length=20, max_length=80)
    assert [(s.words, s.heads, s.meta) for s in a.examples(10)] == [(s.words, s.heads, s.meta) for s in b.examples(10)]
    assert [s.words for s in ListOpsGenerator(4).examples(10)] != [s.words for s in ListOpsGenerator(3).examples(10)]


@pytest.mark.parametrize("length", [100, 1000, 3000])
def test_requested_length_is_met(length):
    s = ListOpsGenerator(length, max_depth=8, max_args=5).example(length=length)
    assert abs(len(s) - length) <= 0.1 * length
    check_example(s, max_depth=8)


def test_min_and_max_length_bound_the_drawn_lengths():
    gen = ListOpsGenerator(0, max_depth=5, max_args=3, min_length=30, max_length=90)
    lengths = [len(s) for s in gen.examples(40)]
    assert all(30 <= n <= 90 for n in lengths) and len(set(lengths)) > 10


def brute_force_sizes(max_depth: int, max_args: int, cap: int) -> list[set[int]]:
    sizes: list[set[int]] = [set()]
    for _ in range(max_depth):
        unit = {1} | sizes[-1]
        found = {2 + sum(parts) for k in range(2, max_args + 1) for parts in product(sorted(unit), repeat=k)}
        sizes.append({s for s in found if s <= cap})
    return sizes


@pytest.mark.parametrize("max_depth,max_args", [(1, 2), (3, 2), (3, 3), (2, 4)])
def test_size_table_matches_brute_force(max_depth, max_args):
    cap = 40
    table = ExpressionSizes(max_depth, max_args, cap)
    expected = brute_force_sizes(max_depth, max_args, cap)
    for depth in range(1, max_depth + 1):
        assert {s for s in range(cap + 1) if table.has(depth, s)} == expected[depth]


def test_impossible_lengths_and_options_raise():
    with pytest.raises(ValueError, match="impossible"):
        ListOpsGenerator(0, max_depth=2, max_args=3).example(length=500)
    with pytest.raises(ValueError, match="max_length"):
        ListOpsGenerator(0, min_length=10)
    with pytest.raises(ValueError, match="max_args"):
        ListOpsGenerator(0, max_args=1)
