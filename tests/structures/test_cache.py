"""Disk caches: hits and misses, results equal to uncached computation, corrupt / stale / foreign entries
recomputed (never trusted), two processes writing one cache at once."""

from __future__ import annotations

import logging
import multiprocessing
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import structattn
from structattn.structures import Sentence, Structure, get_provider
from structattn.structures.cache import AnnotationCache, StructureCache, _decode_structure
from structattn.structures.providers.base import StructureProvider, lengths_token_mask


def random_sentence(n: int, rng: random.Random, sid: str) -> Sentence:
    order = list(range(n))
    rng.shuffle(order)
    heads = [-1] * n
    for k in range(1, n):
        heads[order[k]] = order[rng.randrange(k)]
    edges = [(rng.randrange(n), rng.randrange(n), "x") for _ in range(n)]
    coref = [[(0, 2), (n - 2, n - 1)]] if n > 4 else []
    return Sentence([f"w{i}" for i in range(n)], heads=heads, edges=[e for e in edges if e[0] != e[1]],
                    coref=coref, id=sid)


@pytest.fixture
def sentences() -> list[Sentence]:
    rng = random.Random(7)
    return [random_sentence(n, rng, f"s{k}") for k, n in enumerate([5, 9, 2, 13, 7, 1, 11])]


class Counting:
    """Wraps a provider and counts its batched calls and the items they held."""

    def __init__(self, provider: StructureProvider) -> None:
        self.inner, self.name, self.calls, self.items = provider, provider.name, 0, 0

    def options(self) -> dict:
        return self.inner.options()

    def many(self, items: list) -> list[Structure]:
        self.calls += 1
        self.items += len(items)
        return self.inner.many(items)


class ChainAdjacency(StructureProvider):
    """Test provider with a directed adjacency (i -> i+1) that differs from distance <= 1."""

    name = "test_chain"

    def compute(self, items: list) -> Structure:
        token_mask = lengths_token_mask([len(x) for x in items])
        n = token_mask.shape[1]
        idx = torch.arange(n)
        distance = torch.where(token_mask[:, :, None] & token_mask[:, None, :], (idx[None, :] - idx[:, None]).abs(), -1)
        adjacency = (idx[None, :] - idx[:, None] == 1) | torch.eye(n, dtype=torch.bool)
        return Structure(distance=distance.to(torch.int16), adjacency=adjacency & token_mask[:, :, None] & token_mask[:, None, :],
                         token_mask=token_mask, directed=True)


def assert_same(a: Structure, b: Structure) -> None:
    for name in ("distance", "adjacency", "token_mask", "is_global"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and torch.equal(x, y), name
    assert (a.window_radius, a.dilation, a.directed, a.source, a.ids) == (b.window_radius, b.dilation, b.directed, b.source, b.ids)


PROVIDERS = [("dependency", {}), ("semantic", {}), ("coreference", {}), ("window", {"radius": 2, "global_tokens": (0,)})]


@pytest.mark.parametrize("name,options", PROVIDERS)
def test_cached_equals_uncached_and_counts(tmp_path, sentences, name, options):
    provider = Counting(get_provider(name, **options))
    cache = StructureCache(tmp_path)
    cold = cache.get_or_compute(sentences, provider)
    assert cache.stats() == {"hits": 0, "misses": len(sentences), "invalid": 0}
    assert (provider.calls, provider.items) == (1, len(sentences))  # all misses in one batched call
    warm = cache.get_or_compute(sentences, provider)
    assert cache.stats() == {"hits": len(sentences), "misses": len(sentences), "invalid": 0}
    assert provider.calls == 1
    for s, a, b in zip(sentences, cold, warm):
        assert_same(a, get_provider(name, **options)(s))
        assert_same(b, a)
    assert_same(cache.batch(sentences, provider), provider.inner.batch(sentences))


def test_directed_adjacency_round_trip(tmp_path, sentences):
    provider = ChainAdjacency()
    StructureCache(tmp_path).get_or_compute(sentences, provider)
    cache = StructureCache(tmp_path)
    for s, got in zip(sentences, cache.get_or_compute(sentences, provider)):
        assert_same(got, provider(s))
    assert cache.hits == len(sentences)


def test_partial_hits_and_duplicates(tmp_path, sentences):
    provider = Counting(get_provider("dependency"))
    cache = StructureCache(tmp_path)
    cache.get_or_compute(sentences[:3], provider)
    twin = replace(sentences[4], id="twin")  # same content as sentences[4], another id
    out = cache.get_or_compute(sentences + [twin], provider)
    assert provider.calls == 2 and provider.items == 3 + len(sentences) - 3  # duplicates computed once
    assert out[-1].ids == ["twin"] and out[4].ids == [sentences[4].id]
    assert torch.equal(out[-1].distance, out[4].distance)


def test_stale_entries_miss(tmp_path, sentences, monkeypatch):
    cache = StructureCache(tmp_path)
    cache.get_or_compute(sentences, get_provider("window", radius=2))
    cache.get_or_compute(sentences, get_provider("window", radius=3))  # other options
    assert cache.hits == 0
    cache.get_or_compute(sentences, get_provider("dependency"))
    monkeypatch.setattr(structattn, "__version__", "999.0")  # other library version
    cache.get_or_compute(sentences, get_provider("dependency"))
    assert cache.hits == 0
    changed = replace(sentences[1], heads=[-1] + [0] * (len(sentences[1]) - 1))  # same words, other tree
    got = cache.get_or_compute([changed], get_provider("dependency"))[0]
    assert cache.hits == 0 and torch.equal(got.distance, get_provider("dependency")(changed).distance)


def _entry(cache: StructureCache, sentence: Sentence, provider) -> Path:
    return cache.path(provider.name, cache.key(sentence, provider))


def _check_recomputed(tmp_path, sentence, provider, damage, caplog) -> None:
    cache = StructureCache(tmp_path)
    cache.get_or_compute([sentence], provider)
    path = _entry(cache, sentence, provider)
    path.write_bytes(damage(path.read_bytes()))
    fresh = StructureCache(tmp_path)
    with caplog.at_level(logging.WARNING, logger="structattn.structures.cache"):
        got = fresh.get_or_compute([sentence], provider)[0]
    assert fresh.stats() == {"hits": 0, "misses": 1, "invalid": 1}
    assert str(path) in caplog.text and "recomputing" in caplog.text
    assert_same(got, provider(sentence))
    again = StructureCache(tmp_path)  # the bad entry was overwritten by a good one
    assert_same(again.get_or_compute([sentence], provider)[0], got)
    assert again.stats() == {"hits": 1, "misses": 0, "invalid": 0}


@pytest.mark.parametrize("damage", [
    pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
    pytest.param(lambda b: b"", id="empty"),
    pytest.param(lambda b: b"\x00garbage" * 50, id="garbage"),
    pytest.param(lambda b: b[:-1] + bytes([b[-1] ^ 0x01]), id="last-bit-flipped"),
])
def test_corrupt_entry_recomputed(tmp_path, sentences, damage, caplog):
    _check_recomputed(tmp_path, sentences[3], get_provider("dependency"), damage, caplog)


@pytest.mark.parametrize("provider", [get_provider("dependency"), get_provider("window", radius=1, global_tokens=(0,))],
                         ids=["dependency", "window"])
def test_entry_with_padding_in_its_token_mask_recomputed(tmp_path, sentences, provider, caplog):
    """An intact entry (checksum and key right) whose unbatched token_mask has a False is not an item's
    structure: it used to be accepted, dropping a real word from attention."""
    sentence = sentences[3]
    cache = StructureCache(tmp_path)
    good = cache.get_or_compute([sentence], provider)[0]
    mask = good.token_mask.clone()
    mask[-1] = False
    cache.put(cache.key(sentence, provider), replace(good, token_mask=mask), provider)
    fresh = StructureCache(tmp_path)
    with caplog.at_level(logging.WARNING, logger="structattn.structures.cache"):
        got = fresh.get_or_compute([sentence], provider)[0]
    assert fresh.stats() == {"hits": 0, "misses": 1, "invalid": 1}
    assert "token_mask" in caplog.text and "recomputing" in caplog.text
    assert bool(got.token_mask.all()) and len(got.token_mask) == len(sentence)
    assert_same(got, provider(sentence))
    again = StructureCache(tmp_path)  # overwritten by the recomputed entry
    assert_same(again.get_or_compute([sentence], provider)[0], got)
    assert again.stats() == {"hits": 1, "misses": 0, "invalid": 0}


@pytest.mark.parametrize("provider", [get_provider("dependency"), ChainAdjacency(), get_provider("window", radius=1, global_tokens=(0,))],
                         ids=["dependency", "directed-adjacency", "window"])
def test_every_single_bit_flip_and_truncation_rejected(tmp_path, sentences, provider):
    """Exhaustive: flipping any one bit of an entry, or cutting it anywhere, is detected."""
    sentence = sentences[4]
    cache = StructureCache(tmp_path)
    cache.get_or_compute([sentence], provider)
    path = _entry(cache, sentence, provider)
    good = path.read_bytes()
    damaged = [good[:i] + bytes([good[i] ^ (1 << (i % 8))]) + good[i + 1:] for i in range(len(good))]
    damaged += [good[:i] for i in range(len(good))]
    key = cache.key(sentence, provider)

    def accepted(data: bytes) -> bool:
        try:
            _decode_structure(data, key, sentence)
        except Exception:  # noqa: BLE001  (any error is a rejection; get_or_compute then recomputes)
            return False
        return True

    assert accepted(good)
    fooled = [k for k, data in enumerate(damaged) if accepted(data)]
    assert fooled == [], f"{len(fooled)} damaged versions of a {len(good)}-byte entry were accepted"


def test_foreign_entry_rejected(tmp_path, sentences, caplog):
    """An intact entry stored under another key (copied / renamed file) is not trusted."""
    provider = get_provider("dependency")
    cache = StructureCache(tmp_path)
    cache.get_or_compute(sentences[:2], provider)
    a, b = (_entry(cache, s, provider) for s in sentences[:2])
    shutil.copyfile(a, b)
    fresh = StructureCache(tmp_path)
    got = fresh.get_or_compute([sentences[1]], provider)[0]
    assert fresh.invalid == 1 and "stored key" in caplog.text
    assert_same(got, provider(sentences[1]))


def _writer(root: str, seed: int, rounds: int, failures) -> None:
    torch.set_num_threads(1)
    rng = random.Random(0)  # same sentences in both processes: they fight over the same entries
    items = [random_sentence(n, rng, f"c{n}") for n in range(1, 30)]
    provider = get_provider("dependency")
    expected = provider.many(items)
    cache = StructureCache(root)
    order = random.Random(seed)
    for _ in range(rounds):
        for k in order.sample(range(len(items)), len(items)):
            cache.put(cache.key(items[k], provider), expected[k], provider)
        for got, want in zip(cache.get_or_compute(items, provider), expected):
            if not torch.equal(got.distance, want.distance):
                failures.put(f"seed {seed}: wrong distance for {got.ids}")
    if cache.invalid:
        failures.put(f"seed {seed}: {cache.invalid} invalid entries read")


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method")
def test_two_processes_share_one_cache(tmp_path):
    context = multiprocessing.get_context("fork")
    failures = context.Queue()
    workers = [context.Process(target=_writer, args=(str(tmp_path), seed, 15, failures)) for seed in (1, 2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0]
    messages = []
    while not failures.empty():
        messages.append(failures.get())
    assert messages == []
    assert not list(tmp_path.rglob("*.tmp")), "temporary files left behind"
    rng = random.Random(0)
    items = [random_sentence(n, rng, f"c{n}") for n in range(1, 30)]
    cache = StructureCache(tmp_path)
    for got, item in zip(cache.get_or_compute(items, get_provider("dependency")), items):
        assert_same(got, get_provider("dependency")(item))
    assert cache.stats() == {"hits": len(items), "misses": 0, "invalid": 0}


class FakeParser:
    """A parser double: one sentence per text, words split on spaces, a right-branching chain."""

    name = "fake"

    def __init__(self, variant: str = "a") -> None:
        self.variant, self.calls, self.texts = variant, 0, 0

    def options(self) -> dict:
        return {"variant": self.variant}

    def parse(self, texts):
        self.calls += 1
        self.texts += len(texts)
        out = []
        for text in texts:
            words = text.split()
            out.append([Sentence(words, heads=[-1] + list(range(len(words) - 1)), deprels=["dep"] * len(words),
                                 upos=["X"] * len(words), label_scheme="fake", meta={"text": text})])
        return out


TEXTS = ["the cat sat", "a dog barked loudly", "the cat sat", "hi"]


def test_annotation_cache_hits_and_equality(tmp_path):
    parser = FakeParser()
    cache = AnnotationCache(tmp_path)
    cold = cache.get_or_parse(TEXTS, parser)
    assert (parser.calls, parser.texts) == (1, 3)  # the repeated text is parsed once
    warm = AnnotationCache(tmp_path).get_or_parse(TEXTS, parser)
    assert parser.calls == 1
    assert warm == cold == parser.parse(TEXTS)
    assert cold[0][0] is not cold[2][0] and warm[0][0] is not warm[2][0]  # repeated text: distinct objects
    AnnotationCache(tmp_path).get_or_parse(TEXTS, FakeParser("b"))  # other options: all miss
    other = AnnotationCache(tmp_path)
    other.get_or_parse(TEXTS, FakeParser("b"))
    assert other.stats() == {"hits": 4, "misses": 0, "invalid": 0}


def test_annotation_round_trip_keeps_every_field(tmp_path):
    s = Sentence(["A", "b", "c", "d"], heads=[1, -1, 1, 2], deprels=["x", "root", "y", "z"], upos=["N"] * 4,
                 edges=[(1, 0, "e"), (-1, 1, "top")], coref=[[(0, 1), (2, 4, 3)]], multiword=[(2, 3, "cd")],
                 constituency="(S (A a))", label_scheme="UD", meta={"text": "A b cd", "note": None})
    bare = Sentence(["x"], heads=[-1], edges=[])
    parser = FakeParser()
    parser.parse = lambda texts: [[s], [bare]]  # type: ignore[method-assign]
    AnnotationCache(tmp_path).get_or_parse(["t1", "t2"], parser)
    got = AnnotationCache(tmp_path).get_or_parse(["t1", "t2"], parser)
    assert got == [[s], [bare]] and got[1][0].edges == ()


@pytest.mark.parametrize("damage", [lambda b: b[:-5], lambda b: b.replace(b"cat", b"cot"), lambda b: b"{}"],
                         ids=["truncated", "payload-edited", "wrong-shape"])
def test_annotation_corrupt_entry_reparsed(tmp_path, damage, caplog):
    parser = FakeParser()
    cache = AnnotationCache(tmp_path)
    cache.get_or_parse(["the cat sat"], parser)
    path = cache.path("fake", cache.key("the cat sat", parser))
    path.write_bytes(damage(path.read_bytes()))
    fresh = AnnotationCache(tmp_path)
    got = fresh.get_or_parse(["the cat sat"], parser)
    assert fresh.stats() == {"hits": 0, "misses": 1, "invalid": 1} and parser.calls == 2
    assert got[0][0].words == ("the", "cat", "sat") and "recomputing" in caplog.text
