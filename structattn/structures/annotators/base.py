"""Annotator base: raw texts in, parsed :class:`Sentence` s (with deterministic ids) out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterable, Sequence

from structattn.registry import Registry
from structattn.structures.cache import AnnotationCache
from structattn.structures.sentence import Document, Sentence


class Annotator(ABC):
    """A parser that turns raw texts into sentences.

    Subclasses implement :meth:`parse` (the model call, no ids) and :meth:`options` (everything that
    changes its output: library, model and model versions; part of cache keys). The base class assigns ids
    and reads / fills an :class:`AnnotationCache`.

    Sentence ids are ``f"{text_id}-{k}"``: ``text_id`` is the text's position (or the id given for it) and
    ``k`` the 0-based index of the sentence inside the text, so that ids do not depend on batching,
    processes or the cache.
    """

    name: ClassVar[str]
    #: attributes holding loaded models; dropped when the annotator is pickled to a worker process
    loaded: ClassVar[tuple[str, ...]] = ()

    def __getstate__(self) -> dict[str, Any]:
        return {k: (None if k in self.loaded else v) for k, v in self.__dict__.items()}

    @abstractmethod
    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]:
        """Hook: the sentences of each text, in order (ids are assigned afterwards)."""

    @abstractmethod
    def options(self) -> dict[str, Any]:
        """Hook: library / model names and versions and settings that change the output."""

    def annotate(
        self,
        texts: Iterable[str],
        text_ids: Sequence[Any] | None = None,
        cache: AnnotationCache | None = None,
    ) -> list[Sentence]:
        """Sentences of all ``texts``, flattened in order.

        Args:
            texts: raw texts (each may hold several sentences).
            text_ids: one id per text used in the sentence ids (default: the position ``0, 1, ...``).
            cache: read parsed texts from / write them to this cache.
        """
        return [s for sentences in self.annotate_grouped(texts, text_ids, cache) for s in sentences]

    def annotate_documents(
        self,
        texts: Iterable[str],
        text_ids: Sequence[Any] | None = None,
        cache: AnnotationCache | None = None,
    ) -> list[Document]:
        """One :class:`Document` per text (id: its text id), holding the text's sentences."""
        texts = list(texts)
        ids = text_ids_for(texts, text_ids)
        grouped = self.annotate_grouped(texts, ids, cache)
        return [Document(sentences, id=str(i)) for sentences, i in zip(grouped, ids)]

    def annotate_grouped(
        self,
        texts: Iterable[str],
        text_ids: Sequence[Any] | None = None,
        cache: AnnotationCache | None = None,
    ) -> list[list[Sentence]]:
        """The sentences of each text, with ids (see :meth:`annotate`)."""
        texts = list(texts)
        ids = text_ids_for(texts, text_ids)
        for i, text in zip(ids, texts):
            if not isinstance(text, str):
                raise ValueError(f"{self.name}: text {i!r} is a {type(text).__name__}, expected str")
            if not text.strip():
                raise ValueError(f"{self.name}: text {i!r} is empty")
        grouped = self.parse(texts) if cache is None else cache.get_or_parse(texts, self)
        for i, sentences in zip(ids, grouped):  # fresh objects from parse / get_or_parse: set ids in place
            for k, sentence in enumerate(sentences):
                sentence.id = f"{i}-{k}"
        return grouped


#: parser name (``--parser``) -> annotator class
ANNOTATORS: Registry[Annotator] = Registry("parser", builtin="structattn.structures.annotators.builtin")
register_annotator = ANNOTATORS.register


def text_ids_for(texts: Sequence[str], text_ids: Sequence[Any] | None) -> list[Any]:
    """``text_ids`` as a list, or the positions ``0, 1, ...``; an error when the counts differ."""
    if text_ids is None:
        return list(range(len(texts)))
    text_ids = list(text_ids)
    if len(text_ids) != len(texts):
        raise ValueError(f"{len(text_ids)} text ids for {len(texts)} texts")
    return text_ids
