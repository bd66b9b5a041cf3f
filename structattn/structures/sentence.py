"""Sentences and documents: words plus whatever annotation their source has.

Indices are 0-based everywhere inside the library; a head of ``-1`` marks the root (CoNLL-U's 1-based
heads with ``0`` for the root are converted by the reader). Spans are half-open ``[start, end)``.

A sentence's per-word sequences (``words``, ``heads``, ``deprels``, ``upos``, ``edges``, ``coref``,
``multiword``) are stored as tuples: the constructor accepts lists, but a built sentence cannot be changed in
place (``s.words.append(...)`` raises), so nothing computed from it (its length, a cache key, a structure)
goes stale. To change one, build a new sentence (``dataclasses.replace(s, heads=[...])``) or assign the whole
field (``s.heads = [...]``): both validate it against the rest of the sentence again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from structattn.structures._checks import as_index


@dataclass(frozen=True)
class Mention:
    """A coreference mention: words ``[start, end)``; ``head`` is the index of its head word (absolute,
    inside ``[start, end)``) or ``None`` when the source gives none."""

    start: int
    end: int
    head: int | None = None

    def __post_init__(self) -> None:
        for name in ("start", "end", "head"):
            value = getattr(self, name)
            if value is not None and type(value) is not int:
                object.__setattr__(self, name, as_index(value, f"mention {name}"))

    def shifted(self, offset: int) -> Mention:
        """The same mention ``offset`` words further on (a sentence's mention placed in its document)."""
        return Mention(self.start + offset, self.end + offset, None if self.head is None else self.head + offset)


@dataclass(frozen=True)
class SemanticEdge:
    """A semantic / enhanced-dependency edge ``head -> dependent``; ``head == -1`` marks a top/root edge."""

    head: int
    dependent: int
    label: str = "_"

    def __post_init__(self) -> None:
        for name in ("head", "dependent"):
            value = getattr(self, name)
            if type(value) is not int:
                object.__setattr__(self, name, as_index(value, f"semantic edge {name}"))

    def shifted(self, offset: int) -> SemanticEdge:
        """The same edge ``offset`` words further on (a root edge keeps head ``-1``)."""
        return SemanticEdge(self.head + offset if self.head >= 0 else -1, self.dependent + offset, self.label)


def describe_sentence(sentence_id: str | None) -> str:
    """How error messages name a sentence: ``sentence 'id'`` or ``sentence (no id)``."""
    return f"sentence {sentence_id!r}" if sentence_id is not None else "sentence (no id)"


@dataclass
class Sentence:
    """One sentence: words and optional annotation.

    Args:
        words: the syntactic words (what every structure is computed over).
        heads: basic-tree head of each word, 0-based, ``-1`` for the root.
        deprels: relation label of each word to its head.
        edges: semantic / enhanced dependency edges (several heads per word allowed, reentrancies,
            disconnected parts); ``SemanticEdge`` or ``(head, dependent[, label])`` tuples.
        coref: coreference clusters, each a list of mentions (``Mention`` or ``(start, end[, head])``),
            spans over this sentence's words.
        upos: universal POS tags.
        constituency: a bracketed constituency tree, when the source has one.
        id: sentence id (used in every error message).
        doc_id: id of the document the sentence belongs to.
        label_scheme: the label inventory of ``deprels`` (``"UD"``; ``"spacy"`` for spaCy's English labels).
        multiword: multi-word tokens as ``(first_word, last_word, surface_form)``, inclusive word indices.
        meta: any further metadata (comments of the source, for example).

    Raises:
        ValueError: on empty input, length mismatches, heads out of range, cycles, zero or several roots,
            or spans outside the sentence; the message names the sentence id and the token.

    The sequences are stored as tuples (see the module docstring): ``s.heads == (1, 2, -1)``, and
    ``s.heads == [1, 2, -1]`` is ``False``; compare with ``list(s.heads)``.
    """

    words: Sequence[str]
    heads: Sequence[int] | None = None
    deprels: Sequence[str] | None = None
    edges: Sequence[SemanticEdge] | None = None
    coref: Sequence[Sequence[Mention]] | None = None
    upos: Sequence[str] | None = None
    constituency: str | None = None
    id: str | None = None
    doc_id: str | None = None
    label_scheme: str = "UD"
    multiword: Sequence[tuple[int, int, str]] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in _checked_sequences(self).items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_built", True)

    def __setattr__(self, name: str, value: Any) -> None:
        """Assigning a whole per-word field of a built sentence validates it against the rest (a new
        sentence with the field replaced is checked first); other fields are assigned as they are."""
        if name in PER_WORD_FIELDS and self.__dict__.get("_built", False):
            value = getattr(replace(self, **{name: value}), name)
        object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.words)

    def has(self, annotation: str) -> bool:
        """Whether the annotation (``"heads"``, ``"edges"``, ``"coref"``, ...) is present."""
        return getattr(self, annotation, None) is not None


@dataclass
class Document:
    """Several sentences read as one token sequence, with document-level coreference.

    Args:
        sentences: the sentences in order.
        coref: clusters of mentions whose spans index the concatenated words of all sentences.
        id: document id.
    """

    sentences: list[Sentence]
    coref: list[list[Mention]] | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if not self.sentences:
            raise ValueError(f"document {self.id!r}: no sentences")
        if self.coref is not None:
            self.coref = _located(f"document {self.id!r}", lambda: [[_as_mention(m) for m in c] for c in self.coref])
            validate_mentions(self.coref, len(self), f"document {self.id}")

    @property
    def words(self) -> list[str]:
        """All words, sentence after sentence."""
        return [w for s in self.sentences for w in s.words]

    @property
    def offsets(self) -> list[int]:
        """Index of each sentence's first word in :attr:`words`."""
        out, total = [], 0
        for s in self.sentences:
            out.append(total)
            total += len(s)
        return out

    def __len__(self) -> int:
        return sum(len(s) for s in self.sentences)


#: The per-word sequences of a :class:`Sentence`, stored as tuples and validated whenever assigned.
PER_WORD_FIELDS = frozenset({"words", "heads", "deprels", "upos", "edges", "coref", "multiword"})


def _checked_sequences(sentence: Sentence) -> dict[str, Any]:
    """The per-word fields of ``sentence`` as validated tuples (``ValueError`` naming sentence and token)."""
    where = describe_sentence(sentence.id)
    words = sentence.words
    if isinstance(words, str):
        raise ValueError(f"{where}: words is the string {words[:40]!r}; pass a list of words "
                         "(e.g. text.split()), not a string (it would split into characters)")
    words = tuple(words)
    if not words:
        raise ValueError(f"{where}: empty sentence (no words)")
    bad = next((i for i, w in enumerate(words) if not isinstance(w, str)), None)
    if bad is not None:
        raise ValueError(f"{where}: word {bad} is {words[bad]!r} ({type(words[bad]).__name__}); "
                         "words must be strings")
    n = len(words)
    out: dict[str, Any] = {"words": words, "multiword": tuple(tuple(m) for m in sentence.multiword)}
    for name in ("heads", "deprels", "upos"):
        values = getattr(sentence, name)
        if values is not None:
            if isinstance(values, str):
                raise ValueError(f"{where}: {name} is the string {values[:40]!r}; expected a list")
            values = tuple(values)
            if len(values) != n:
                raise ValueError(f"{where}: {len(values)} {name} for {n} words")
        out[name] = values
    if out["heads"] is not None:
        out["heads"] = _heads(out["heads"], sentence.id, words)
        validate_tree(out["heads"], sentence.id, words)
    out["edges"] = None if sentence.edges is None else _located(where, lambda: tuple(_as_edge(e) for e in sentence.edges))
    if out["edges"] is not None:
        validate_edges(out["edges"], n, sentence.id)
    out["coref"] = None if sentence.coref is None else _located(
        where, lambda: tuple(tuple(_as_mention(m) for m in cluster) for cluster in sentence.coref))
    if out["coref"] is not None:
        validate_mentions(out["coref"], n, where)
    return out


def _located(where: str, convert: Any) -> Any:
    """``convert()``, with ``where`` (the sentence) put in front of a ``ValueError``."""
    try:
        return convert()
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _heads(heads: tuple[Any, ...], sentence_id: str | None, words: Sequence[str]) -> tuple[int, ...]:
    """Heads as ints; a float (``1.7``, even ``2.0``), bool or other non-integer names its token."""
    if all(type(h) is int for h in heads):
        return heads
    where = describe_sentence(sentence_id)
    return tuple(as_index(h, f"{where}: token {i} ({words[i]!r}) head") for i, h in enumerate(heads))


def _as_edge(edge: SemanticEdge | Sequence[Any]) -> SemanticEdge:
    if isinstance(edge, SemanticEdge):
        return edge
    return SemanticEdge(edge[0], edge[1], str(edge[2]) if len(edge) > 2 else "_")


def _as_mention(mention: Mention | Sequence[Any]) -> Mention:
    if isinstance(mention, Mention):
        return mention
    head = mention[2] if len(mention) > 2 else None
    return Mention(mention[0], mention[1], head)


def validate_tree(heads: Sequence[int], sentence_id: str | None, words: Sequence[str] | None = None) -> None:
    """Check that ``heads`` form one rooted tree (0-based heads, ``-1`` root).

    Raises:
        ValueError: naming the sentence and the first offending token.
    """
    where = describe_sentence(sentence_id)
    n = len(heads)

    def tok(i: int) -> str:
        return f"token {i} ({words[i]!r})" if words is not None else f"token {i}"

    roots = [i for i, h in enumerate(heads) if h == -1]
    for i, h in enumerate(heads):
        if h < -1 or h >= n:
            raise ValueError(f"{where}: {tok(i)} has head {h}, but the sentence has {n} tokens (valid: -1..{n - 1})")
        if h == i:
            raise ValueError(f"{where}: {tok(i)} is its own head")
    if not roots:
        raise ValueError(f"{where}: no root (no token has head -1)")
    if len(roots) > 1:
        raise ValueError(f"{where}: {len(roots)} roots: tokens {roots}; a tree has exactly one")
    state = [0] * n  # 0 unvisited, 1 on current path, 2 reaches the root
    for start in range(n):
        path, i = [], start
        while i != -1 and state[i] == 0:
            state[i] = 1
            path.append(i)
            i = heads[i]
        if i != -1 and state[i] == 1:
            cycle = path[path.index(i):]
            raise ValueError(f"{where}: cycle through tokens {cycle} (starting at {tok(i)})")
        for j in path:
            state[j] = 2


def validate_edges(edges: Iterable[SemanticEdge], n: int, sentence_id: str | None) -> None:
    """Check that every edge endpoint lies in the sentence."""
    where = describe_sentence(sentence_id)
    for e in edges:
        if not -1 <= e.head < n:
            raise ValueError(f"{where}: edge to token {e.dependent} has head {e.head}, but the sentence has {n} tokens")
        if not 0 <= e.dependent < n:
            raise ValueError(f"{where}: edge from head {e.head} names dependent {e.dependent}, but the sentence has {n} tokens")


def validate_mentions(clusters: Iterable[Iterable[Mention]], n: int, where: str) -> None:
    """Check that every mention span (and head) lies inside the ``n`` words; errors start with ``where``
    (e.g. ``describe_sentence(id)`` or ``"document d1"``)."""
    for c, cluster in enumerate(clusters):
        for m in cluster:
            if not (0 <= m.start < m.end <= n):
                raise ValueError(f"{where}: coreference cluster {c} has mention [{m.start}, {m.end}) outside the {n} tokens")
            if m.head is not None and not (m.start <= m.head < m.end):
                raise ValueError(f"{where}: coreference cluster {c}: mention head {m.head} outside its span [{m.start}, {m.end})")
