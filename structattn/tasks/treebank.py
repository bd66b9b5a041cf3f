"""Shared base of tasks read from a dependency treebank (the bundled Czech PUD by default), a CoNLL-U file
or raw text parsed on the fly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from structattn.tasks.base import Item, Task
from structattn.progress import progress_disabled
from structattn.structures.sentence import Sentence


def load_treebank(source: str, limit: int | None, parser: str | None = None, cache: str | None = None) -> list[Sentence]:
    """Sentences of ``source``: ``"bundled"`` (gold Czech PUD shipped with the package), a CoNLL-U path, or,
    with ``parser``, a raw-text file (one text per non-blank line) parsed by that annotator.

    Args:
        limit: keep the first ``limit`` sentences (raw text: only the first ``limit`` lines are parsed).
        parser: ``"spacy"`` or ``"stanza"`` (see :func:`~structattn.structures.annotators.get_annotator`).
        cache: an :class:`~structattn.structures.cache.AnnotationCache` directory for parsed texts.
    """
    if source == "bundled":
        if parser is not None:
            raise ValueError(f"parser={parser!r} was given for the bundled treebank, which is already parsed (gold)")
        from structattn.structures.readers.bundled import load_bundled

        return list(load_bundled(limit))
    if not Path(source).is_file():
        raise ValueError(f"treebank source {source!r} is neither 'bundled' nor an existing file")
    if parser is None:
        if Path(source).suffix.lower() == ".txt":
            raise ValueError(f"{source!r} looks like raw text; pass parser='spacy' (or 'stanza') to parse it, or give "
                             "a CoNLL-U file")
        from structattn.structures import read_conllu

        sentences = list(read_conllu(source))
        return sentences[:limit] if limit is not None else sentences
    return _parse_text_file(Path(source), limit, parser, cache)


def _parse_text_file(path: Path, limit: int | None, parser: str, cache: str | None) -> list[Sentence]:
    """Parse the lines of ``path`` in chunks, with a progress bar (off when ``$CI`` is set)."""
    from structattn.structures.annotators import get_annotator
    from structattn.structures.annotators.commands import parse_in_chunks, read_texts
    from structattn.structures.cache import AnnotationCache

    texts, ids = read_texts(path)
    if limit is not None:
        texts, ids = texts[:limit], ids[:limit]
    annotator = get_annotator(parser)
    annotator.options()  # a missing model fails here, before the progress bar
    store = None if cache is None else AnnotationCache(cache)
    quiet = progress_disabled()
    with tqdm(total=len(texts), desc=f"parsing {path.name} ({parser})", unit="text", disable=quiet) as bar:
        sentences = parse_in_chunks(annotator, texts, ids, store, bar)
    return sentences[:limit] if limit is not None else sentences


class TreebankTask(Task):
    """Items from a treebank, split into contiguous train / dev / test blocks (the last sentences are test).

    Args:
        source: ``"bundled"``, a CoNLL-U path, or a raw-text file (one text per line) with ``parser``.
        limit: use only the first ``limit`` sentences.
        dev_fraction, test_fraction: sizes of the dev and test blocks.
        parser: parse ``source`` as raw text with this annotator (``"spacy"``, ``"stanza"``); the trees are
            then the parser's (spaCy's labels are not UD: see :class:`~structattn.structures.annotators.
            spacy_annotator.SpacyAnnotator`).
        cache: directory of an annotation cache, so that later runs (seeds, settings) do not parse again.
    """

    requires = ("heads",)
    options_ignored = ("cache",)  # a cache gives the same sentences

    def __init__(self, source: str = "bundled", limit: int | None = None, dev_fraction: float = 0.1,
                 test_fraction: float = 0.1, parser: str | None = None, cache: str | None = None) -> None:
        if not (0 < dev_fraction < 1 and 0 < test_fraction < 1 and dev_fraction + test_fraction < 1):
            raise ValueError(f"task {self.name!r}: need 0 < dev_fraction, test_fraction and their sum < 1, got "
                             f"{dev_fraction}, {test_fraction}")
        if limit is not None and limit < 3:
            raise ValueError(f"task {self.name!r}: limit must be >= 3 (one sentence per split), got {limit}")
        self.source, self.limit, self.parser, self.cache = source, limit, parser, cache
        self.dev_fraction, self.test_fraction = dev_fraction, test_fraction
        self._splits: dict[str, list[Item]] | None = None

    def options(self) -> dict[str, Any]:
        options = {"source": self.source, "limit": self.limit, "dev_fraction": self.dev_fraction,
                   "test_fraction": self.test_fraction}
        return options if self.parser is None else {**options, "parser": self.parser}  # (cache: same output)

    def splits(self) -> dict[str, list[Item]]:
        if self._splits is None:
            sentences = load_treebank(self.source, self.limit, self.parser, self.cache)
            for s in sentences:
                self.check(s)
            n = len(sentences)
            n_test = max(1, round(n * self.test_fraction))
            n_dev = max(1, round(n * self.dev_fraction))
            if n - n_test - n_dev < 1:
                raise ValueError(f"task {self.name!r}: {n} sentences are too few for train/dev/test")
            cut = n - n_test - n_dev
            self._splits = {"train": sentences[:cut], "dev": sentences[cut:cut + n_dev], "test": sentences[cut + n_dev:]}
        return self._splits
