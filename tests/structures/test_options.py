"""options() derived from constructor arguments: cache keys and task run ids tell configurations apart."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from structattn.structures import GraphProvider, Sentence, StructureProvider
from structattn.structures.cache import StructureCache, producer_key
from structattn.structures.providers.dependency import DependencyProvider
from structattn.structures.structure import Structure
from structattn.tasks.base import Task


class CappedTree(StructureProvider):
    """A user provider with an option and no options(): tree hops, unreachable beyond ``max_hops``."""

    name = "test_capped_tree"

    def __init__(self, max_hops: int = 3) -> None:
        self.max_hops = max_hops

    def compute(self, items: list) -> Structure:
        tree = DependencyProvider().compute(items)
        distance = tree.distance.masked_fill(tree.distance > self.max_hops, -1)
        return Structure(distance=distance, token_mask=tree.token_mask)


class Forgetful(GraphProvider):
    """Overrides options() but leaves out ``ring``."""

    name = "test_forgetful"

    def __init__(self, ring: bool = False, label: str = "x") -> None:
        self.ring, self.label = ring, label

    def options(self) -> dict[str, Any]:
        return {"label": self.label}

    def graph_edges(self, item):
        n = len(item)
        return [(i, i + 1) for i in range(n - 1)] + ([(n - 1, 0)] if self.ring and n > 2 else [])


def chain(n: int) -> Sentence:
    return Sentence([f"w{i}" for i in range(n)], heads=[-1] + list(range(n - 1)), id=f"chain{n}")


def test_derived_options_list_every_argument_with_defaults():
    assert CappedTree().options() == {"max_hops": 3}
    assert CappedTree(5).options() == {"max_hops": 5}
    assert repr(CappedTree(max_hops=2)) == "CappedTree(max_hops=2)"


def test_cache_does_not_serve_another_configuration(tmp_path):
    """Reproduction: entries of max_hops=1 were served for max_hops=5 (both keyed by options() == {})."""
    cache, items = StructureCache(tmp_path), [chain(7), chain(6)]
    one = cache.get_or_compute(items, CappedTree(max_hops=1))
    five = cache.get_or_compute(items, CappedTree(max_hops=5))
    assert cache.stats()["hits"] == 0 and cache.stats()["misses"] == 4
    assert int(one[0].distance.max()) == 1 and int(five[0].distance.max()) == 5
    assert torch.equal(five[0].distance, CappedTree(max_hops=5)(items[0]).distance)
    assert cache.key(items[0], CappedTree(1)) != cache.key(items[0], CappedTree(5))


def test_incomplete_override_raises_naming_provider_and_option():
    assert Forgetful().options() == {"label": "x"}  # the left-out argument is at its default: key unambiguous
    with pytest.raises(ValueError, match=r"'test_forgetful'.*leaves out constructor argument\(s\) ring=True"):
        producer_key(Forgetful(ring=True))
    assert "ring=True" not in repr(Forgetful(label="y"))  # repr never raises
    assert "Forgetful(ring=True" in repr(Forgetful(ring=True))


def test_ignored_arguments_and_forwarded_parent_arguments():
    class Batched(CappedTree):
        options_ignored = ("chunk",)

        def __init__(self, chunk: int = 8, **options: Any) -> None:
            super().__init__(**options)
            self.chunk = chunk

    assert Batched(chunk=3, max_hops=2).options() == {"max_hops": 2}
    assert Batched().options() == {"max_hops": 3}  # the parent's default is recorded too


class Tiny(Task):
    """A task with an option and no options()."""

    name = "test_tiny"
    output = "sentence"

    def __init__(self, size: int = 4, seed: int = 0) -> None:
        self.size, self.seed = size, seed

    def splits(self):
        return {"train": [], "dev": [], "test": []}

    def label(self, item):
        return 0


class TinyForgetful(Tiny):
    def options(self) -> dict[str, Any]:
        return {"size": self.size}


def test_task_options_name_every_argument():
    assert Tiny().options() == {"size": 4, "seed": 0}
    assert Tiny(size=9, seed=2).options() != Tiny(size=9, seed=3).options()
    assert TinyForgetful(size=9).options() == {"size": 9}
    with pytest.raises(ValueError, match=r"'test_tiny'.*seed=3"):
        TinyForgetful(seed=3).options()


def test_keyword_arguments_at_their_declared_defaults_may_be_left_out():
    class Keywords(Tiny):
        options_defaults = {"beam": 4}

        def __init__(self, **options: Any) -> None:
            super().__init__()
            self.beam = options.get("beam", 4)

        def options(self) -> dict[str, Any]:
            return {"beam": self.beam} if self.beam != 4 else {}

    assert Keywords(beam=4).options() == Keywords().options() == {}  # spelled out at its default: same id
    assert Keywords(beam=5).options() == {"beam": 5}


def test_translation_options_spelled_at_their_defaults_keep_the_run_id():
    from structattn.experiments.spec import make_task

    plain = make_task("translation_synthetic(train=4)").options()
    assert make_task("translation_synthetic(train=4, shared_vocab=False, beam=5)").options() == plain
    assert make_task("translation_synthetic(train=4, shared_vocab=True)").options() == {**plain, "shared_vocab": True}


def test_a_comparison_with_an_incomplete_task_options_fails_at_validation(monkeypatch):
    from structattn.encoders import EncoderConfig
    from structattn.experiments import Comparison, Setup
    from structattn.tasks.translation import TranslationTask
    from structattn.training import TrainConfig

    monkeypatch.setattr(TranslationTask, "options_defaults", {})  # as before the fix: shared_vocab=False unrecorded
    comparison = Comparison.declare({"mt": "translation_synthetic(train=4, dev=2, test=2, shared_vocab=False)"},
                                    {"full": "full"}, [0], Setup(EncoderConfig(d_model=8, num_layers=1, num_heads=2,
                                                                               ffn_dim=8), TrainConfig()))
    with pytest.raises(ValueError, match=r"task 'mt': .*leaves out constructor argument\(s\) shared_vocab=False"):
        comparison.validate()  # and so --dry-run, before any training
