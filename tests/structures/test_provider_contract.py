"""The provider contract for every registered provider, run through the installed kit ``structattn.testing``
exactly as a user's plugin would be: one test per (provider, check), e.g.
``test_contract[window-cache_key]``.

Each built-in provider has one case below (``@case(name)``): options, an independent networkx/hand oracle
from ``tests/structures/oracles.py`` and, where the default random annotations do not fit, a sentence
factory. A registered provider without a case fails naming this file.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import networkx as nx
import pytest

from structattn.structures import Sentence, provider_names
from structattn.structures.providers import PROVIDERS
from structattn.testing import PROVIDER_CHECKS, ProviderCase, Skipped
from tests.structures import oracles

CASES: dict[str, Callable[[], ProviderCase]] = {}


def case(name: str) -> Callable[[Callable[[], ProviderCase]], Callable[[], ProviderCase]]:
    def add(build: Callable[[], ProviderCase]) -> Callable[[], ProviderCase]:
        CASES[name] = build
        return build

    return add


@case("dependency")
def dependency_case() -> ProviderCase:
    def oracle(item):
        graph = nx.Graph()
        graph.add_nodes_from(range(len(item)))
        graph.add_edges_from((i, h) for i, h in enumerate(_heads(item)) if h >= 0)
        return oracles.distances_from_graph(graph, len(item))

    return ProviderCase("dependency", oracle)


@case("semantic")
def semantic_case() -> ProviderCase:
    return ProviderCase("semantic", lambda s: oracles.distances_from_graph(oracles.semantic_graph(s), len(s)))


@case("coreference")
def coreference_case() -> ProviderCase:
    def oracle(s):
        return oracles.distances_from_graph(oracles.coreference_graph(len(s), s.coref, s.heads), len(s))

    return ProviderCase("coreference", oracle)


@case("union")
def union_case() -> ProviderCase:
    """Documents: each sentence's tree plus coreference links across sentences."""

    def oracle(doc):
        heads = _heads(doc)
        graph = oracles.coreference_graph(len(doc), doc.coref, heads)
        graph.add_edges_from((i, h) for i, h in enumerate(heads) if h >= 0)
        return oracles.distances_from_graph(graph, len(doc))

    def documents(length: int, rng: random.Random):
        return oracles.random_document(rng, f"d{length}")

    return ProviderCase("union", oracle, options={"providers": ["dependency", "coreference"]},
                        sentence_factory=documents, alternatives={"providers": ["dependency"]})


@case("window")
def window_case() -> ProviderCase:
    radius, dilation, global_tokens = 2, 2, (0,)

    def oracle(s):
        n = len(s)
        out = [[-1] * n for _ in range(n)]
        for i in range(n):
            for j in range(n):
                if i != j and (i in global_tokens or j in global_tokens):
                    out[i][j] = 1  # a global token reaches and is reached by every token in one hop
                elif abs(i - j) <= radius * dilation and abs(i - j) % dilation == 0:
                    out[i][j] = abs(i - j)
        return out

    return ProviderCase("window", oracle, options={"radius": radius, "dilation": dilation, "global_tokens": global_tokens},
                        sentence_factory=lambda n, rng: Sentence(["x"] * n, id=f"w{n}"),
                        alternatives={"global_tokens": ()})


def _heads(item) -> list[int]:
    if isinstance(item, Sentence):
        return list(item.heads)
    return [h + off if h >= 0 else -1 for s, off in zip(item.sentences, item.offsets) for h in s.heads]


def kit_case(name: str) -> ProviderCase:
    assert name in CASES, (f"registered provider {name!r} has no contract case: add @case({name!r}) to "
                           "tests/structures/test_provider_contract.py")
    return CASES[name]()


@pytest.mark.parametrize("check", list(PROVIDER_CHECKS))
@pytest.mark.parametrize("name", provider_names())
def test_contract(name: str, check: str) -> None:
    try:
        PROVIDER_CHECKS[check](kit_case(name))
    except Skipped as skip:
        pytest.skip(f"{name}: {skip}")


@pytest.mark.parametrize("name", provider_names())
def test_builtin_providers_claim_symmetry_correctly(name: str) -> None:
    """Every built-in source is undirected: each says so (``symmetric = True``), and its structures are not
    marked directed; the symmetry check itself then runs in test_contract[NAME-symmetry]."""
    cls = PROVIDERS.get(name)
    assert getattr(cls, "symmetric", False) is True, f"{cls.__module__}.{cls.__qualname__} must set symmetric = True"
    c = kit_case(name)
    items = c.batches(c.build())[0]
    assert not c.build().batch(items).directed
