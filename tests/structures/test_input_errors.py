"""Input files that are not UTF-8, a UTF-8 byte-order mark, and a cache entry path taken by a directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from structattn.structures import Sentence, get_provider, read_conllu, read_sdp
from structattn.structures.annotators.commands import main as parse_main
from structattn.structures.annotators.commands import read_texts
from structattn.structures.cache import AnnotationCache, StructureCache
from structattn.structures.readers import _source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CZECH = "# sent_id = c1\n# text = Žluťoučký kůň\n1\tŽluťoučký\t_\tADJ\t_\t_\t2\tamod\t_\t_\n2\tkůň\t_\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
BOM = b"\xef\xbb\xbf"


@pytest.fixture
def cp1250_conllu(tmp_path) -> Path:
    path = tmp_path / "czech.conllu"
    path.write_bytes(("# sent_id = c0\n1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n\n" + CZECH * 40).encode("cp1250"))
    return path


def first_bad_byte(path: Path) -> int:
    data = path.read_bytes()
    for k in range(len(data)):
        if data[k] >= 0x80:
            return k
    raise AssertionError("no non-ASCII byte")


def test_not_utf8_conllu_names_file_line_byte_and_likely_encoding(cp1250_conllu):
    pytest.importorskip("charset_normalizer", reason="the likely encoding is named only with charset_normalizer")
    offset = first_bad_byte(cp1250_conllu)
    byte = cp1250_conllu.read_bytes()[offset]
    with pytest.raises(ValueError) as info:
        read_conllu(cp1250_conllu)
    message = str(info.value)
    assert f"file {str(cp1250_conllu)!r} is not UTF-8 (line 5, byte offset {offset}: 0x{byte:02x}" in message
    assert "it looks like" in message and "iconv -f" in message and "-t utf-8" in message


def test_not_utf8_without_charset_normalizer_shows_the_bytes(cp1250_conllu, monkeypatch):
    monkeypatch.setattr(_source, "_guess_encoding", lambda data: None)
    with pytest.raises(ValueError, match=r"czech\.conllu' is not UTF-8 \(line 5, byte offset \d+: 0x[0-9a-f]{2}.*\); "
                                         r"convert it to UTF-8"):
        read_conllu(cp1250_conllu)


def test_not_utf8_sdp_and_raw_text(tmp_path, monkeypatch):
    sdp = tmp_path / "graphs.sdp"
    sdp.write_bytes((FIXTURES / "dm_small.sdp").read_text(encoding="utf-8").replace("the", "thé").encode("latin-1"))
    with pytest.raises(ValueError, match=r"graphs\.sdp' is not UTF-8 \(line \d+, byte offset \d+: 0xe9"):
        read_sdp(sdp)
    raw = tmp_path / "texts.txt"
    raw.write_bytes("First line.\nCafé au lait.\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"texts\.txt' is not UTF-8 \(line 2, byte offset 15: 0xe9"):
        read_texts(raw)


def test_parse_command_reports_non_utf8_in_one_line(tmp_path, capsys):
    raw = tmp_path / "texts.txt"
    raw.write_bytes("Café au lait.\n".encode("latin-1"))
    assert parse_main([str(raw), "--out", str(tmp_path / "out.conllu"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("structattn parse: error: file ") and "is not UTF-8 (line 1, byte offset 3: 0xe9" in err
    assert not (tmp_path / "out.conllu").exists()


def test_a_leading_bom_is_dropped(tmp_path):
    conllu = tmp_path / "bom.conllu"
    conllu.write_bytes(BOM + CZECH.encode("utf-8"))
    (sentence,) = read_conllu(conllu)
    assert sentence.id == "c1" and sentence.words == ("Žluťoučký", "kůň")
    assert read_conllu("\ufeff" + CZECH)[0].id == "c1"  # the text itself, as a str
    sdp = tmp_path / "bom.sdp"
    sdp.write_bytes(BOM + (FIXTURES / "dm_small.sdp").read_bytes())
    assert read_sdp(sdp) == read_sdp(FIXTURES / "dm_small.sdp")
    raw = tmp_path / "bom.txt"
    raw.write_bytes(BOM + "Hello there.\n".encode("utf-8"))
    assert read_texts(raw) == (["Hello there."], ["L1"])


def test_a_bom_inside_the_text_is_content(tmp_path):
    conllu = tmp_path / "inner.conllu"
    conllu.write_bytes(CZECH.encode("utf-8") + BOM + CZECH.replace("c1", "c2").encode("utf-8"))
    with pytest.raises(ValueError, match="line 6"):
        read_conllu(conllu)  # only a leading BOM is a signature


def test_structure_cache_entry_replaced_by_a_directory(tmp_path):
    cache, provider = StructureCache(tmp_path), get_provider("dependency")
    sentence = Sentence(["a", "b", "c"], heads=[1, -1, 1], id="s1")
    entry = cache.path(provider.name, cache.key(sentence, provider))
    entry.mkdir(parents=True)
    with pytest.raises(ValueError, match=rf"structattn cache: {entry} is a directory, not a cache entry.*Remove it"):
        cache.get_or_compute([sentence], provider)
    entry.rmdir()
    assert cache.get_or_compute([sentence], provider)[0].distance.tolist() == [[0, 1, 2], [1, 0, 1], [2, 1, 0]]


class OneSentence:
    name = "fake"

    def options(self) -> dict:
        return {}

    def parse(self, texts):
        return [[Sentence(t.split(), heads=[-1] + list(range(len(t.split()) - 1)))] for t in texts]


def test_annotation_cache_entry_under_a_file(tmp_path):
    cache, parser = AnnotationCache(tmp_path), OneSentence()
    entry = cache.path(parser.name, cache.key("a b", parser))
    entry.parent.parent.mkdir(parents=True)
    entry.parent.write_text("not a folder")
    with pytest.raises(ValueError, match=rf"structattn cache: {entry} lies under a file"):
        cache.get_or_parse(["a b"], parser)


@pytest.mark.parametrize("name", ["dependency", "window"])
@pytest.mark.parametrize(
    "value,shown",
    [
        ("the cat sat", r"str \('the cat sat'\); build one: Sentence\(words=text\.split\(\)"),
        (["the", "cat", "sat"], r"list of str \(\['the', 'cat', 'sat'\]\); build one: Sentence\(words=\[\.\.\.\]"),
        ([Sentence(["a"])], r"list of 1 Sentence/Document items; for several, call provider\.batch\(items\)"),
        (7, r"int$"),
    ],
    ids=["str", "list-of-str", "list-of-sentences", "int"],
)
def test_provider_given_no_sentence_says_what_it_expected(name, value, shown):
    provider = get_provider(name)
    with pytest.raises(TypeError, match=rf"^provider '{name}': expected a Sentence or Document, got {shown}"):
        provider(value)  # used to fail deep inside with "'str' object has no attribute 'id'"
    if isinstance(value, list) and isinstance(value[0], str):
        with pytest.raises(TypeError, match=r"expected a Sentence or Document, got str \('the'\)"):
            provider.batch(value)
