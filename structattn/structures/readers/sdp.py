"""SDP 2015 (SemEval 2015 Task 18: DM, PAS, PSD) -> :class:`Sentence` with semantic edges.

Format (Oepen et al., 2015): the file starts with ``#SDP 2015``; each sentence starts with an id line
``#2xxxxxxx`` and has one tab-separated line per token: ID, FORM, LEMMA, POS, TOP (``+``/``-``), PRED
(``+``/``-``), FRAME, then one argument column per predicate, predicates in word order. Row ``i`` of the
``k``-th argument column holds the label of the edge from the ``k``-th predicate to word ``i`` (``_``: none).

Each sentence becomes ``Sentence(words, edges, upos=POS, id)``: one :class:`SemanticEdge` ``(predicate,
argument, label)`` per argument cell and ``(-1, word, "top")`` per top node, sorted by ``(dependent, head,
label)``. SDP graphs are not trees, so there are no ``heads``. ``meta`` keeps ``lemmas`` and ``frames``.
"""

from __future__ import annotations

from structattn.structures.readers._source import PathOrText, check_control_characters, numbered_blocks, read_source
from structattn.structures.sentence import SemanticEdge, Sentence

__all__ = ["read_sdp"]

HEADER = "#SDP 2015"
FIXED = ("id", "form", "lemma", "pos", "top", "pred", "frame")
TOP_LABEL = "top"


def read_sdp(path_or_text: PathOrText) -> list[Sentence]:
    """Read every sentence of an SDP 2015 file.

    Args:
        path_or_text: a path, or the text itself (a ``str`` with a newline or tab).

    Raises:
        ValueError: a missing ``#SDP 2015`` header, a sentence without id line, token ids out of order,
            TOP/PRED values other than ``+``/``-``, or a token line whose number of argument columns differs
            from the number of predicates; the message names the line, the sentence and the token.
    """
    text, source = read_source(path_or_text)
    check_control_characters(text, source, ("id", "form", "lemma", "pos", "top", "pred", "frame"))
    lines = text.split("\n")
    first = next((k for k, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise ValueError(f"{source}: no sentences (the input is empty)")
    if lines[first].strip() != HEADER:
        raise ValueError(f"{source} line {first + 1}: expected the header {HEADER!r}, found {lines[first]!r} "
                         "(only the 2015 format, with the FRAME column, is read)")
    body = "\n".join(lines[first + 1:])
    sentences = [_sentence(block, source) for block in numbered_blocks(body, first_line=first + 2)]
    if not sentences:
        raise ValueError(f"{source}: no sentences after the header")
    return sentences


def _sentence(block: list[tuple[int, str]], source: str) -> Sentence:
    number, id_line = block[0]
    if not id_line.startswith("#"):
        raise ValueError(f"{source} line {number}: expected a sentence id line '#2xxxxxxx', found {id_line!r}")
    sentence_id = id_line[1:].strip()
    where = f"sentence {sentence_id!r}"
    rows = [(n, line.split("\t")) for n, line in block[1:] if not line.startswith("#")]
    if not rows:
        raise ValueError(f"{source} line {number}: {where} has no tokens")
    predicates = []
    for i, (n, cols) in enumerate(rows):
        if len(cols) < len(FIXED):
            raise ValueError(f"{source} line {n}: {where}: token {i}: expected at least {len(FIXED)} columns "
                             f"({', '.join(FIXED)}), found {len(cols)}")
        token = f"token {i} ({cols[1]!r}, ID {cols[0]})"
        if cols[0] != str(i + 1):
            raise ValueError(f"{source} line {n}: {where}: {token}: ID out of order, expected {i + 1}")
        for name, value in (("TOP", cols[4]), ("PRED", cols[5])):
            if value not in ("+", "-"):
                raise ValueError(f"{source} line {n}: {where}: {token}: {name} is {value!r}, expected '+' or '-'")
        if cols[5] == "+":
            predicates.append(i)
    edges = []
    for i, (n, cols) in enumerate(rows):
        arguments = cols[len(FIXED):]
        if len(arguments) != len(predicates):
            raise ValueError(f"{source} line {n}: {where}: token {i} ({cols[1]!r}): {len(arguments)} argument columns, "
                             f"but the sentence has {len(predicates)} predicates (PRED '+')")
        edges += [SemanticEdge(p, i, label) for p, label in zip(predicates, arguments) if label != "_"]
        if cols[4] == "+":
            edges.append(SemanticEdge(-1, i, TOP_LABEL))
    return Sentence(
        words=[cols[1] for _, cols in rows],
        upos=[cols[3] for _, cols in rows],
        edges=sorted(edges, key=lambda e: (e.dependent, e.head, e.label)),
        id=sentence_id,
        meta={"lemmas": [cols[2] for _, cols in rows], "frames": [cols[6] for _, cols in rows]},
    )
