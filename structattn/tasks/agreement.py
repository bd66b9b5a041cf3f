"""``agreement``: subject-verb agreement with attractors (Linzen et al. 2016), from the synthetic grammar."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from structattn.tasks.base import register_task
from structattn.tasks.synthetic import SyntheticTask
from structattn.structures.generators import GrammarGenerator
from structattn.structures.sentence import Sentence

#: what stands in the verb's place in the model input
VERB_PLACEHOLDER = "<verb>"
NUMBERS = ("Sing", "Plur")


def balanced_agreement(generator: GrammarGenerator, k: int, attractors: Sequence[int]) -> list[Sentence]:
    """``k`` agreement sentences, attractor counts in turn, and within each count singular and plural verbs
    in turn (so every (count, number) cell holds the same number of sentences, up to one)."""
    pools: dict[tuple[int, str], list[Sentence]] = defaultdict(list)
    out = []
    for i in range(k):
        count, number = attractors[i % len(attractors)], NUMBERS[(i // len(attractors)) % 2]
        while not pools[(count, number)]:
            for s in generator.agreement_sentences(8, count):
                pools[(count, s.meta["verb_number"])].append(s)
        out.append(pools[(count, number)].pop(0))
    return out


def masked_verb(words: Sequence[str], verb_index: int) -> list[str]:
    """The words with the verb replaced by :data:`VERB_PLACEHOLDER`."""
    return [VERB_PLACEHOLDER if i == verb_index else w for i, w in enumerate(words)]


@register_task("agreement")
class Agreement(SyntheticTask):
    """Sentence classification: the number of the main verb (0 singular, 1 plural), read from the sentence
    with that verb replaced by ``<verb>``. Only the subject's head noun decides it; the attractors (nouns of
    the other number between subject and verb) are distractors, so a model that follows the dependency
    arc verb -> subject should not lose accuracy as they grow. Splits are balanced over attractor counts and
    numbers (majority baseline 0.5); ``meta["num_attractors"]`` lets the ``by_attractors`` probe step report
    accuracy per count.

    Args:
        attractors: attractor counts, used in turn.
        train, dev, test, seed: see :class:`~structattn.tasks.synthetic.SyntheticTask`.
        max_depth: embedding depth of the grammar (see :class:`GrammarGenerator`).
    """

    output = "sentence"
    requires = ("heads",)

    def __init__(self, attractors: Sequence[int] = (0, 1, 2, 3), max_depth: int = 3, **sizes: Any) -> None:
        super().__init__(**sizes)
        self.attractors = tuple(int(a) for a in attractors)
        if not self.attractors or min(self.attractors) < 0:
            raise ValueError(f"task 'agreement': attractors must be counts >= 0, got {list(attractors)}")
        self.max_depth = max_depth

    def options(self) -> dict[str, Any]:
        return {"attractors": list(self.attractors), "max_depth": self.max_depth, **super().options()}

    @property
    def num_labels(self) -> int:
        return 2

    def generate(self, split: str, k: int, seed: int) -> list[Sentence]:
        return balanced_agreement(GrammarGenerator(seed, max_depth=self.max_depth, p_coord=0.0), k, self.attractors)

    def inputs(self, item: Sentence) -> list[str]:
        return masked_verb(item.words, _verb(item))

    def label(self, item: Sentence) -> int:
        _verb(item)
        return NUMBERS.index(item.meta["verb_number"])


def _verb(item: Sentence) -> int:
    if "verb_index" not in item.meta or item.meta.get("verb_number") not in NUMBERS:
        raise ValueError(f"task 'agreement': sentence {item.id!r} has no agreement record (meta verb_index, "
                         f"verb_number); use GrammarGenerator sentences")
    return int(item.meta["verb_index"])
