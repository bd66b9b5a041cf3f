"""Readers refuse what is no text: control characters in CoNLL-U / SDP lines, and CR-only line endings."""

from __future__ import annotations

from pathlib import Path

import pytest

from structattn.structures import read_conllu, read_sdp
from structattn.structures.annotators.commands import read_texts

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TWO_WORDS = ("# sent_id = s1\n# text = a b\n1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n"
             "2\tb\tb\tX\t_\t_\t1\tdep\t_\tSpaceAfter=No\n\n")


def conllu_file(tmp_path: Path, text: str, name: str = "damaged.conllu") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize(
    "old,new,expected",
    [
        ("2\tb\tb", "2\tb\x00\tb", r"line 4, column 4: control character U\+0000 \(NUL\) in the FORM of token ID '2'"),
        ("2\tb\tb", "2\t\x00b\tb", r"line 4, column 3: control character U\+0000 \(NUL\) in the FORM of token ID '2'"),
        ("1\ta\ta", "1\ta\ta\x1b", r"line 3, column 6: control character U\+001B \(ESC\) in the LEMMA of token ID '1'"),
        ("2\tb\tb", "2\tb\rb\tb", r"line 4, column 4: control character U\+000D \(CR\) in the FORM"),
        ("SpaceAfter=No", "SpaceAfter=No\x85", r"line 4, column \d+: control character U\+0085 \(NEL\) in the MISC"),
        ("text = a b", "text = a\x07b", r"line 2, column 11: control character U\+0007 in a comment"),
    ],
    ids=["nul-after-form", "nul-first", "esc-lemma", "lone-cr", "c1-misc", "bell-comment"],
)
def test_control_character_names_file_line_column_and_field(tmp_path, old, new, expected):
    path = conllu_file(tmp_path, TWO_WORDS.replace(old, new))
    with pytest.raises(ValueError, match=rf"^damaged\.conllu {expected}.*damaged or not plain text"):
        read_conllu(path)  # a NUL in the FORM used to be read as part of the word "b\x00"


def test_tabs_in_comments_and_crlf_line_ends_are_text(tmp_path):
    plain = read_conllu(TWO_WORDS)
    tabbed = read_conllu(TWO_WORDS.replace("text = a b", "text = a\tb"))
    assert tabbed[0].words == plain[0].words == ("a", "b") and tabbed[0].meta["text"] == "a\tb"
    assert read_conllu(conllu_file(tmp_path, TWO_WORDS.replace("\n", "\r\n"))) == plain


def test_sdp_control_character_is_located(tmp_path):
    text = (FIXTURES / "dm_small.sdp").read_text(encoding="utf-8")
    assert text.startswith("#SDP 2015\n#20000001\n1\tThe\t")
    path = tmp_path / "graphs.sdp"
    path.write_text(text.replace("1\tThe\t", "1\tThe\x00\t", 1), encoding="utf-8")
    with pytest.raises(ValueError, match=r"graphs\.sdp line 3, column 6: control character U\+0000 \(NUL\) in the "
                                         r"FORM of token ID '1'"):
        read_sdp(path)


def test_cr_only_line_endings_are_named_for_every_reader(tmp_path):
    mac = conllu_file(tmp_path, TWO_WORDS.replace("\n", "\r"), "mac.conllu")
    with pytest.raises(ValueError, match=r"^file '.*mac\.conllu' uses CR-only line endings; convert to LF"):
        read_conllu(mac)
    with pytest.raises(ValueError, match=r"^the text uses CR-only line endings; convert to LF"):
        read_conllu(TWO_WORDS.replace("\n", "\r"))
    sdp = tmp_path / "mac.sdp"
    sdp.write_bytes((FIXTURES / "dm_small.sdp").read_bytes().replace(b"\n", b"\r"))
    with pytest.raises(ValueError, match=r"^file '.*mac\.sdp' uses CR-only line endings; convert to LF"):
        read_sdp(sdp)
    raw = tmp_path / "mac.txt"
    raw.write_bytes(b"First text.\rSecond text.\r")
    with pytest.raises(ValueError, match=r"^file '.*mac\.txt' uses CR-only line endings; convert to LF"):
        read_texts(raw)
