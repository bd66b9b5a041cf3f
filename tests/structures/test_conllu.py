"""read_conllu / read_conllu_documents on hand-written fixtures: conversions, empty nodes, coreference, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from structattn.structures import Mention, SemanticEdge, read_conllu, read_conllu_documents

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
UD = FIXTURES / "ud_small.conllu"
COREF = FIXTURES / "corefud_small.conllu"


def E(head: int, dependent: int, label: str) -> SemanticEdge:
    return SemanticEdge(head, dependent, label)


def test_basic_columns_and_comments():
    s1, s2, s3 = read_conllu(UD)
    assert s1.words == ("Vamos", "a", "el", "mercado", ".")  # syntactic words, not the surface token "al"
    assert s1.heads == (-1, 3, 3, 0, 0)  # HEAD 0/4/4/1/1 made 0-based, root -1
    assert s1.deprels == ("root", "case", "det", "obl", "punct")
    assert s1.upos == ("VERB", "ADP", "DET", "NOUN", "PUNCT")
    assert (s1.id, s1.doc_id, s2.doc_id, s3.doc_id) == ("s1", "d1", "d1", "d2")
    assert s1.meta == {"text": "Vamos al mercado.", "text_en": "Let's go to the market."}
    assert s1.multiword == ((1, 2, "al"),)  # "2-3 al": words 1..2, inclusive, 0-based
    assert s1.edges == (E(-1, 0, "root"), E(3, 1, "case"), E(3, 2, "det"), E(0, 3, "obl:a"), E(0, 4, "punct"))
    assert s1.coref is None


def test_path_str_and_text_give_the_same_sentences():
    text = UD.read_text(encoding="utf-8")
    assert read_conllu(UD) == read_conllu(str(UD)) == read_conllu(text)


def test_empty_node_collapsed_onto_its_heads():
    """Gapping "Mary ate rice and John [ate] beans": 5.1 (head 2:conj) heads and/John/beans; each of them
    is attached to word 2 ("ate", index 1) with its own label, so ate -> 5.1 -> beans becomes ate -> beans."""
    s2 = read_conllu(UD)[1]
    assert len(s2) == 7 and "ate" not in s2.words[2:]  # the empty node is not a word
    assert s2.heads == (1, -1, 1, 4, 1, 4, 1)  # the basic tree never goes through empty nodes
    assert s2.edges == (E(1, 0, "nsubj"), E(-1, 1, "root"), E(1, 2, "obj"), E(1, 3, "cc"), E(1, 4, "nsubj"),
                        E(1, 5, "obj"), E(1, 6, "punct"))


def test_empty_node_under_the_root_and_several_heads():
    """0.1 has only 0:root: "on" (the basic root, one of its dependents) stands in for it and takes its root
    edge; the other dependents attach to "on"; "on" keeps its own 0:root as well."""
    s3 = read_conllu(UD)[2]
    assert s3.edges == (E(2, 0, "cc"), E(2, 1, "advmod"), E(-1, 2, "conj"), E(-1, 2, "root"), E(2, 3, "punct"))


def test_empty_nodes_heading_empty_nodes_resolve_transitively():
    text = _sentence(
        "1\ta\t_\tX\t_\t_\t0\troot\t0:root\t_",
        "1.1\t_\t_\tX\t_\t_\t_\t_\t1:conj\t_",
        "1.2\t_\t_\tX\t_\t_\t_\t_\t1.1:obj|0:root\t_",
        "2\tb\t_\tX\t_\t_\t1\tdep\t1.2:nmod\t_",
    )
    (s,) = read_conllu(text)
    assert s.edges == (E(-1, 0, "root"), E(-1, 1, "nmod"), E(0, 1, "nmod"))


def test_coreference_sentence_level():
    c1, c2, c3, c4 = read_conllu(COREF)
    # John(0) saw his(2) old dog(4): e1 = John, his; e2 = "his old dog" headed by its 3rd word
    assert c1.coref == ((Mention(0, 1, 0), Mention(2, 3, 2)), (Mention(2, 5, 4),))
    assert c1.meta["coref_ids"] == ["e1", "e2"] and c1.meta["global.Entity"] == "eid-etype-head-other"
    # discontinuous e3 "him ... cat" -> covering span [3, 7) with head "him"; nested e4 "the cat" headed by "cat"
    assert c2.coref == ((Mention(0, 1, 0),), (Mention(3, 7, 3),), (Mention(3, 4, 3),), (Mention(5, 7, 6),))
    assert c2.meta["coref_ids"] == ["e2", "e3", "e1", "e4"]
    # the zero mention of e1 (empty node 1.1 only) is dropped; e5's head is the empty node -> None
    assert c3.coref == ((Mention(1, 2, None),),) and c3.meta["coref_ids"] == ["e5"]
    assert c4.coref is None and "coref_ids" not in c4.meta  # doc2 has no coreference annotation


def test_coreference_document_level():
    doc1, doc2 = read_conllu_documents(COREF)
    assert (doc1.id, doc2.id) == ("doc1", "doc2") and [s.id for s in doc1.sentences] == ["c1", "c2", "c3"]
    assert doc1.offsets == [0, 6, 16]
    assert doc1.coref == [
        [Mention(0, 1, 0), Mention(2, 3, 2), Mention(9, 10, 9)],  # e1: John, his, him
        [Mention(2, 5, 4), Mention(6, 7, 6)],  # e2: his old dog, It
        [Mention(9, 13, 9)],  # e3
        [Mention(11, 13, 12)],  # e4
        [Mention(17, 18, None)],  # e5
    ]
    assert doc2.coref is None
    words = doc1.words
    assert [words[m.start:m.end] for m in doc1.coref[1]] == [["his", "old", "dog"], ["It"]]


def test_documents_without_newdoc_form_one_document():
    text = _sentence("1\ta\t_\tX\t_\t_\t0\troot\t_\t_") + _sentence("1\tb\t_\tX\t_\t_\t0\troot\t_\t_", sid="s2")
    (doc,) = read_conllu_documents(text)
    assert doc.id is None and len(doc.sentences) == 2 and doc.coref is None


def test_columns_left_blank_are_none():
    (s,) = read_conllu(_sentence("1\ta\t_\t_\t_\t_\t_\t_\t_\t_", "2\tb\t_\t_\t_\t_\t_\t_\t_\t_"))
    assert s.words == ("a", "b") and s.heads is None and s.deprels is None and s.upos is None and s.edges is None


# ----------------------------------------------------------------------------------------------- errors

def _sentence(*token_lines: str, sid: str = "s1") -> str:
    return f"# sent_id = {sid}\n" + "\n".join(token_lines) + "\n\n"


def _s2_text_with(old: str, new: str) -> tuple[str, int]:
    """The UD fixture with one line replaced, and the (1-based) number of that line."""
    lines = UD.read_text(encoding="utf-8").split("\n")
    number = lines.index(old) + 1
    lines[number - 1] = new
    return "\n".join(lines), number


JOHN = "5\tJohn\tJohn\tPROPN\t_\t_\t2\tconj\t5.1:nsubj\t_"
RICE = "3\trice\trice\tNOUN\t_\t_\t2\tobj\t2:obj\t_"
AND = "4\tand\tand\tCCONJ\t_\t_\t5\tcc\t5.1:cc\t_"

BAD_LINES = {
    "head out of range": (RICE, RICE.replace("\t2\tobj", "\t42\tobj"), ["token 2 ('rice', ID 3)", "HEAD 42", "7 words"]),
    # and(4) <- John(5) <- and(4): the message starts the cycle at "and", so it points at that line
    "cycle": (JOHN, JOHN.replace("\t2\tconj", "\t4\tconj"), ["cycle through tokens [3, 4]", "token 3 ('and')"], AND),
    "own head": (RICE, RICE.replace("\t2\tobj", "\t3\tobj"), ["token 2 ('rice')", "own head"]),
    "two roots": (RICE, RICE.replace("\t2\tobj", "\t0\tobj"), ["token 2 ('rice', ID 3) is a second root", "token 1 ('ate'"]),
    "missing column": (RICE, RICE.rsplit("\t", 1)[0], ["token ID 3 ('rice')", "expected 10 tab-separated columns, found 9"]),
    "non-integer head": (RICE, RICE.replace("\t2\tobj", "\tx\tobj"), ["token ID 3 ('rice')", "head", "'x'"]),
    "bad id": (RICE, RICE.replace("3\trice", "3a\trice", 1), ["token ID 3a ('rice')", "'3a' is not a valid ID"]),
    "id out of order": (RICE, RICE.replace("3\trice", "4\trice", 1), ["word ID 4 ('rice') out of order: expected 3"]),
    "DEPS head out of range": (RICE, RICE.replace("2:obj", "9:obj"), ["token 2 ('rice', ID 3)", "DEPS head 9"]),
    "DEPS malformed": (RICE, RICE.replace("2:obj", "obj"), ["token ID 3 ('rice')", "malformed DEPS 'obj'"]),
    "DEPS names missing empty node": (AND, AND.replace("5.1:cc", "5.2:cc"), ["token 3 ('and', ID 4)", "empty node 5.2"]),
    "DEPS self loop": (RICE, RICE.replace("2:obj", "3:obj"), ["token 2 ('rice', ID 3) is its own head in DEPS"]),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_errors_name_line_sentence_and_token(case):
    old, new, expected, *at = BAD_LINES[case]
    text, number = _s2_text_with(old, new)
    if at:  # the error is about another line than the one changed
        number = text.split("\n").index(at[0]) + 1
    with pytest.raises(ValueError) as info:
        read_conllu(text)
    message = str(info.value)
    assert message.startswith(f"<text> line {number}: sentence 's2': "), message
    for part in expected:
        assert part in message, f"{part!r} missing from {message!r}"


def test_error_names_the_file(tmp_path):
    text, number = _s2_text_with(RICE, RICE.replace("\t2\tobj", "\t42\tobj"))
    path = tmp_path / "cs.conllu"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^cs\.conllu line {number}: sentence 's2': token 2 \('rice', ID 3\) has HEAD 42"):
        read_conllu(path)


def test_empty_node_cycle_is_an_error():
    text = _sentence("1\ta\t_\tX\t_\t_\t0\troot\t1.1:x\t_", "1.1\t_\t_\tX\t_\t_\t_\t_\t1.2:y\t_",
                     "1.2\t_\t_\tX\t_\t_\t_\t_\t1.1:z\t_")
    with pytest.raises(ValueError, match=r"<text> line 4: sentence 's1': empty nodes form a cycle in DEPS: 1\.1 -> 1\.2 -> 1\.1"):
        read_conllu(text)


def test_multiword_range_beyond_the_sentence():
    text = _sentence("1-3\tabc\t_\t_\t_\t_\t_\t_\t_\t_", "1\ta\t_\tX\t_\t_\t0\troot\t_\t_", "2\tb\t_\tX\t_\t_\t1\tdep\t_\t_")
    with pytest.raises(ValueError, match=r"<text> line 2: sentence 's1': multi-word token 1-3 \('abc'\) does not cover"):
        read_conllu(text)


ENTITY_ERRORS = {
    "unclosed": ("(e1-x-1", "(e1-x-1", r"line 2: sentence 's1': entity bracket '\(e1' at token 0 \('a', ID 1\) is never closed"),
    "not opened": ("_", "e7)", r"line 3: sentence 's1': token 1 \('b', ID 2\) closes entity 'e7', which is not open"),
    "malformed": ("(e1-x-1)", "e1)junk", r"line 3: sentence 's1': token 1 \('b', ID 2\): malformed Entity='e1\)junk'"),
    "head not a number": ("(e1-x-h", "e1)", r"line 2: .*has head 'h', not a number"),
    "head beyond mention": ("(e1-x-5", "e1)", r"line 2: .*has head 5, but only 2 nodes"),
    "discontinuous without last part": ("(e1[1/2]-x-1)", "_", r"line 1: sentence 's1': discontinuous mention of "
                                                              r"entity 'e1' is missing its last part"),
    "discontinuous without first part": ("_", "(e1[2/2]-x-1)", r"line 3: .*token 1 \('b', ID 2\): part 2/2 of a "
                                                               r"discontinuous mention of 'e1' has no first part"),
}


@pytest.mark.parametrize("case", sorted(ENTITY_ERRORS))
def test_entity_errors(case):
    first, second, pattern = ENTITY_ERRORS[case]
    misc = [f"Entity={v}" if v != "_" else "_" for v in (first, second)]
    text = _sentence(f"1\ta\t_\tX\t_\t_\t0\troot\t_\t{misc[0]}", f"2\tb\t_\tX\t_\t_\t1\tdep\t_\t{misc[1]}")
    with pytest.raises(ValueError, match=pattern):
        read_conllu(text)


@pytest.mark.parametrize("text", ["", "\n\n", "   \n"])
def test_empty_input_is_a_clear_error(text):
    with pytest.raises(ValueError, match="no sentences"):
        read_conllu(text)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_conllu(tmp_path / "missing.conllu")
