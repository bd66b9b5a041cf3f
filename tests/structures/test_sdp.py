"""read_sdp: SDP 2015 graphs (hand-written DM-style fixture) and malformed input."""

from __future__ import annotations

from pathlib import Path

import pytest

from structattn.structures import SemanticEdge, read_sdp

SDP = Path(__file__).resolve().parent.parent / "fixtures" / "dm_small.sdp"


def E(head: int, dependent: int, label: str) -> SemanticEdge:
    return SemanticEdge(head, dependent, label)


def test_graphs_of_the_fixture():
    first, second = read_sdp(SDP)
    assert first.id == "20000001" and first.words == ("The", "cat", "sat", ".")
    assert first.upos == ("DT", "NN", "VBD", ".") and first.heads is None
    # predicates The(0) and sat(2) own argument columns 1 and 2; sat is the top
    assert first.edges == (E(0, 1, "BV"), E(2, 1, "ARG1"), E(-1, 2, "top"))
    # "Dogs" is an argument of both verbs (reentrancy); "." has no edge at all (SDP graphs may be disconnected)
    assert second.edges == (E(1, 0, "ARG1"), E(3, 0, "ARG1"), E(2, 1, "L-INDEX"), E(-1, 2, "top"), E(2, 3, "R-INDEX"))
    assert second.meta["frames"][2] == "c:i-i-i" and second.meta["lemmas"][0] == "dog"


def test_text_input_equals_path_input():
    assert read_sdp(SDP.read_text(encoding="utf-8")) == read_sdp(SDP) == read_sdp(str(SDP))


def _replace(old: str, new: str) -> tuple[str, int]:
    lines = SDP.read_text(encoding="utf-8").split("\n")
    number = lines.index(old) + 1
    lines[number - 1] = new
    return "\n".join(lines), number


CAT = "2\tcat\tcat\tNN\t-\t-\tn:x\tBV\tARG1"
BAD = {
    "missing argument column": (CAT, "2\tcat\tcat\tNN\t-\t-\tn:x\tBV",
                                r"sentence '20000001': token 1 \('cat'\): 1 argument columns, but the sentence has 2 predicates"),
    "extra argument column": (CAT, CAT + "\tARG2", r"token 1 \('cat'\): 3 argument columns, but the sentence has 2"),
    "bad top": (CAT, CAT.replace("\t-\t-\t", "\tyes\t-\t"), r"sentence '20000001': token 1 \('cat', ID 2\): TOP is 'yes'"),
    "bad pred": (CAT, CAT.replace("\t-\t-\t", "\t-\t?\t"), r"token 1 \('cat', ID 2\): PRED is '\?'"),
    "id out of order": (CAT, CAT.replace("2\tcat", "3\tcat", 1), r"token 1 \('cat', ID 3\): ID out of order, expected 2"),
    "too few columns": (CAT, "2\tcat\tcat", r"token 1: expected at least 7 columns"),
    "missing id line": ("#20000002", "", r"expected a sentence id line"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_errors_name_the_line(case):
    old, new, pattern = BAD[case]
    text, number = _replace(old, new)
    if case == "missing id line":
        number += 1  # the block now starts on the next line, the first token
    with pytest.raises(ValueError, match=rf"^<text> line {number}: .*{pattern}"):
        read_sdp(text)


def test_header_is_required():
    text = SDP.read_text(encoding="utf-8").replace("#SDP 2015\n", "", 1)
    with pytest.raises(ValueError, match=r"<text> line 1: expected the header '#SDP 2015', found '#20000001'"):
        read_sdp(text)
    with pytest.raises(ValueError, match="no sentences"):
        read_sdp("")
    with pytest.raises(ValueError, match="no sentences after the header"):
        read_sdp("#SDP 2015\n\n")
