"""The provider contract as reusable checks.

``check_provider("my_source", oracle)`` builds the registered provider and runs every check of
:data:`PROVIDER_CHECKS` on random inputs; the first failure raises ``AssertionError`` naming the check, the
sentence and the token pair. ``oracle(item)`` is an independent ``(n, n)`` distance matrix (list of lists or
tensor; ``-1`` for unreachable) written from the provider's documented definition.

Symmetry is checked where the provider claims it: the class attribute ``symmetric = True`` (undirected
sources). The cache key (``structattn.structures.cache.producer_key``) must change with every constructor
option; an option listed in ``options_ignored`` must then leave the output unchanged.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import torch

from structattn.structures import GraphProvider, Structure, collate, get_provider
from structattn.structures.cache import producer_key
from structattn.structures.providers import PROVIDERS, StructureProvider
from structattn.testing._checks import Skipped, expect, run_checks
from structattn.testing.inputs import random_annotated

Oracle = Callable[[Any], Any]
SentenceFactory = Callable[[int, random.Random], Any]


@dataclass
class ProviderCase:
    """What the checks need to know about one provider.

    Attributes:
        name: registry name; ``options`` its constructor options.
        oracle: ``item -> (n, n)`` distances.
        sentence_factory: ``(length, rng) -> Sentence or Document``; default random annotations of what
            the provider ``requires`` (random trees for ``heads``).
        lengths: item lengths of each random batch; ``seeds`` one batch each.
        alternatives: per constructor option, a different valid value for the cache-key check (bool, int and
            float options get one automatically).
    """

    name: str
    oracle: Oracle
    options: dict[str, Any] = field(default_factory=dict)
    sentence_factory: SentenceFactory | None = None
    lengths: tuple[int, ...] = (1, 2, 3, 7, 16)
    seeds: tuple[int, ...] = (0, 1, 2)
    alternatives: dict[str, Any] = field(default_factory=dict)

    def build(self, **overrides: Any) -> StructureProvider:
        provider = get_provider(self.name, **{**self.options, **overrides})
        expect(isinstance(provider, StructureProvider), f"{self.name!r} built a {type(provider).__name__}")
        return provider

    def batches(self, provider: StructureProvider) -> list[list[Any]]:
        out = []
        for seed in self.seeds:
            rng = random.Random(seed)
            if self.sentence_factory is None:
                out.append([random_annotated(n, rng, tuple(provider.requires), f"r{seed}-{n}") for n in self.lengths])
            else:
                out.append([self.sentence_factory(n, rng) for n in self.lengths])
        return out


def _dense(structure: Structure) -> tuple[torch.Tensor, torch.Tensor]:
    return structure.dense_distance(), structure.dense_adjacency()


def _first_difference(got: torch.Tensor, want: torch.Tensor, item: Any, what: str) -> None:
    if tuple(got.shape) != tuple(want.shape):
        raise AssertionError(f"{what}: item {item.id!r} gives shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    bad = (got != want).nonzero()
    if len(bad):
        i, j = (int(x) for x in bad[0])
        raise AssertionError(f"{what}: item {item.id!r} ({len(item)} tokens), {len(bad)} pair(s) differ; first "
                             f"({i}, {j}): got {int(got[i, j])}, expected {int(want[i, j])}")


def check_oracle(case: ProviderCase) -> None:
    provider = case.build()
    for items in case.batches(provider):
        distance, _ = _dense(provider.batch(items))
        for k, item in enumerate(items):
            n = len(item)
            want = torch.as_tensor(case.oracle(item), dtype=torch.int64)
            _first_difference(distance[k, :n, :n].to(torch.int64), want, item, "distance vs oracle")


def check_networkx(case: ProviderCase) -> None:
    """Graph providers: distances equal networkx shortest paths over ``graph_edges``; adjacency = edges + loops."""
    provider = case.build()
    if not isinstance(provider, GraphProvider):
        raise Skipped(f"{type(provider).__name__} is not a GraphProvider: no edge list to cross-check")
    for items in case.batches(provider):
        distance, adjacency = _dense(provider.batch(items))
        for k, item in enumerate(items):
            n = len(item)
            graph = nx.Graph()
            graph.add_nodes_from(range(n))
            graph.add_edges_from(provider.graph_edges(item))
            want = torch.full((n, n), -1, dtype=torch.int64)
            for i, row in nx.all_pairs_shortest_path_length(graph):
                for j, d in row.items():
                    want[i, j] = d
            _first_difference(distance[k, :n, :n].to(torch.int64), want, item, "distance vs networkx")
            linked = (want == 0) | (want == 1)
            _first_difference(adjacency[k, :n, :n].to(torch.int64), linked.to(torch.int64), item, "adjacency vs networkx edges")


def check_padding(case: ProviderCase) -> None:
    """``batch`` equals ``collate`` of single structures; padding is -1 / False; ``token_mask`` marks lengths."""
    provider = case.build()
    for items in case.batches(provider):
        batch, again = provider.batch(items), collate([provider(x) for x in items])
        for name in ("distance", "adjacency", "token_mask", "is_global"):
            a, b = getattr(batch, name), getattr(again, name)
            expect((a is None) == (b is None), f"{name}: batch gives {type(a).__name__}, collate gives {type(b).__name__}")
            if a is not None:
                expect(torch.equal(a, b), f"{name} of provider.batch differs from collate of single items")
        lengths = torch.tensor([len(x) for x in items])
        expect(torch.equal(batch.token_mask, torch.arange(batch.token_mask.shape[1])[None, :] < lengths[:, None]),
               f"token_mask does not mark the first len(item) tokens of items {[x.id for x in items]}")
        distance, adjacency = _dense(batch)
        real = batch.token_mask[:, :, None] & batch.token_mask[:, None, :]
        expect(bool((distance[~real] == -1).all()), "padded distance entries must be -1")
        expect(not bool(adjacency[~real].any()), "padded adjacency entries must be False")


def check_dtypes(case: ProviderCase) -> None:
    """Integer distances >= -1 with a zero diagonal; bool adjacency with self-loops on real tokens."""
    provider = case.build()
    for items in case.batches(provider):
        batch = provider.batch(items)
        distance, adjacency = _dense(batch)
        expect(not distance.is_floating_point() and distance.dtype != torch.bool, f"distance has dtype {distance.dtype}, expected an integer type")
        expect(adjacency.dtype == torch.bool, f"adjacency has dtype {adjacency.dtype}, expected torch.bool")
        expect(bool((distance >= -1).all()), f"distances below -1: {sorted(set(distance[distance < -1].tolist()))}")
        mask = batch.token_mask
        expect(bool((torch.diagonal(distance, dim1=1, dim2=2)[mask] == 0).all()), "distance[i, i] must be 0 on real tokens")
        expect(bool(torch.diagonal(adjacency, dim1=1, dim2=2)[mask].all()), "adjacency must have self-loops on real tokens")
        expect(set(provider.provides) <= batch.fields(), f"provides {sorted(provider.provides)}, the structure has {sorted(batch.fields())}")


def check_determinism(case: ProviderCase) -> None:
    provider, twin = case.build(), case.build()
    for items in case.batches(provider):
        first, second, third = provider.batch(items), provider.batch(items), twin.batch(items)
        for name in ("distance", "adjacency", "token_mask", "is_global"):
            for other, who in ((second, "a second call"), (third, "a second instance")):
                a, b = getattr(first, name), getattr(other, name)
                expect((a is None and b is None) or (a is not None and b is not None and torch.equal(a, b)),
                       f"{name} differs between two calls ({who}) on the same items")


def check_symmetry(case: ProviderCase) -> None:
    provider = case.build()
    if not getattr(provider, "symmetric", False):
        raise Skipped(f"{type(provider).__name__} does not claim symmetry (class attribute symmetric = True)")
    for items in case.batches(provider):
        batch = provider.batch(items)
        distance, adjacency = _dense(batch)
        expect(not batch.directed, "the provider claims symmetric = True but marks its structure directed")
        for k, item in enumerate(items):
            n = len(item)
            _first_difference(distance[k, :n, :n].T.to(torch.int64), distance[k, :n, :n].to(torch.int64), item,
                              "symmetric = True, but distance[j, i] != distance[i, j]")
            _first_difference(adjacency[k, :n, :n].T.to(torch.int64), adjacency[k, :n, :n].to(torch.int64), item,
                              "symmetric = True, but adjacency[j, i] != adjacency[i, j]")


def _candidates(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value + 2, value - 1]
    if isinstance(value, float):
        return [value * 2 + 1.0, value + 0.5]
    return []


def _alternative(case: ProviderCase, option: str, value: Any) -> tuple[Any, StructureProvider] | None:
    """A different value of ``option`` the constructor accepts, and the provider built with it."""
    tried = [case.alternatives[option]] if option in case.alternatives else _candidates(value)
    for other in tried:
        try:
            return other, case.build(**{option: other})
        except (ValueError, TypeError):
            continue
    return None


def check_cache_key(case: ProviderCase) -> None:
    """Equal options give equal keys; changing any one constructor option changes the key (or, for an
    option in ``options_ignored``, leaves every output unchanged)."""
    base = case.build()
    key = _key(base)
    expect(key == _key(case.build()), "two providers with the same options have different cache keys")
    cls = PROVIDERS.get(case.name)
    ignored = set(getattr(cls, "options_ignored", ()))
    unchecked = []
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        value = case.options.get(p.name, p.default)
        found = _alternative(case, p.name, value)
        if found is None:
            unchecked.append(p.name)
            continue
        other, provider = found
        if _key(provider) != key:
            continue
        if p.name in ignored and _same_outputs(case, base, provider):
            continue
        raise AssertionError(f"the cache key ignores option {p.name!r}: {p.name}={value!r} and {p.name}={other!r} "
                             f"give the same key {key['options']!r}" + (" although the outputs differ" if p.name in ignored else ""))
    if unchecked:
        print(f"check_provider({case.name!r}): cache key not checked for option(s) {unchecked}: "
              "pass alternatives={option: other_value}")


def _key(provider: StructureProvider) -> dict[str, Any]:
    try:
        return producer_key(provider)
    except ValueError as err:
        raise AssertionError(f"the cache key of {provider!r} cannot be built: {err}") from None


def _same_outputs(case: ProviderCase, a: StructureProvider, b: StructureProvider) -> bool:
    for items in case.batches(a):
        (da, aa), (db, ab) = _dense(a.batch(items)), _dense(b.batch(items))
        if not (torch.equal(da, db) and torch.equal(aa, ab)):
            return False
    return True


#: every provider check by name, in the order ``check_provider`` runs them
PROVIDER_CHECKS: dict[str, Callable[[ProviderCase], None]] = {
    "oracle": check_oracle,
    "networkx": check_networkx,
    "padding": check_padding,
    "dtypes": check_dtypes,
    "determinism": check_determinism,
    "symmetry": check_symmetry,
    "cache_key": check_cache_key,
}


def check_provider(
    name: str,
    oracle: Oracle,
    *,
    options: dict[str, Any] | None = None,
    sentence_factory: SentenceFactory | None = None,
    lengths: tuple[int, ...] = (1, 2, 3, 7, 16),
    seeds: tuple[int, ...] = (0, 1, 2),
    alternatives: dict[str, Any] | None = None,
    checks: list[str] | None = None,
) -> dict[str, str]:
    """Run the provider contract on the registered provider ``name``.

    Args:
        name: registry name (register it first: import your plugin).
        oracle: ``item -> (n, n)`` distance matrix (list of lists or tensor, -1 = unreachable).
        options: constructor options.
        sentence_factory: ``(length, rng: random.Random) -> Sentence or Document``; by default random
            annotations of what the provider ``requires`` (random trees for ``heads``).
        lengths, seeds: one random batch of items of these lengths per seed.
        alternatives: per constructor option, another valid value for the cache-key check.
        checks: names from :data:`PROVIDER_CHECKS` to run (default all).

    Returns:
        ``{check: "passed" | "skipped: REASON"}`` (skips are also printed).

    Raises:
        AssertionError: naming the failed check, the item and the token pair.
    """
    case = ProviderCase(name, oracle, dict(options or {}), sentence_factory, tuple(lengths), tuple(seeds),
                        dict(alternatives or {}))
    selected = {c: PROVIDER_CHECKS[c] for c in (checks or PROVIDER_CHECKS)}
    return run_checks("provider", name, {c: (lambda f=f: f(case)) for c, f in selected.items()})
