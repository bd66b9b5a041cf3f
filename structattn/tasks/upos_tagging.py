"""``upos_tagging``: tag every word with its universal part of speech (the 17 UD tags)."""

from __future__ import annotations

from structattn.structures.sentence import Sentence, describe_sentence
from structattn.tasks.base import register_task
from structattn.tasks.treebank import TreebankTask

#: the universal POS tags of UD v2, in the order of the guidelines; a label is an index into this tuple
UPOS_TAGS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
             "SCONJ", "SYM", "VERB", "X")
_INDEX = {tag: i for i, tag in enumerate(UPOS_TAGS)}


@register_task("upos_tagging")
class UposTagging(TreebankTask):
    """Predict each word's UPOS tag (accuracy over words; the baseline is the majority tag of train).

    A task the tree says little about beyond what the words say: a control for the tree-reading tasks
    (``head_selection``, ``depth_tagging``), where a structural prior should help more.

    Args:
        **treebank: ``source``, ``limit``, ``dev_fraction``, ``test_fraction``, ``parser``, ``cache``, ``trees``
            (see :class:`~structattn.tasks.treebank.TreebankTask`; the trees are only the model's structure).

    Raises:
        ValueError: a word whose tag is not one of :data:`UPOS_TAGS`, naming the sentence and the word.
    """

    output = "token"
    requires = ("heads", "upos")
    parsed_trees = True  # labels read upos only

    @property
    def num_labels(self) -> int:
        return len(UPOS_TAGS)

    def label(self, item: Sentence) -> list[int]:
        self.check(item)
        labels = []
        for i, (word, tag) in enumerate(zip(item.words, item.upos)):
            if tag not in _INDEX:
                raise ValueError(f"task 'upos_tagging': {describe_sentence(item.id)}, word {i + 1} {word!r} has UPOS "
                                 f"{tag!r}, not one of the 17 UD tags {', '.join(UPOS_TAGS)}")
            labels.append(_INDEX[tag])
        return labels
