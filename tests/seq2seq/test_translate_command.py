"""``structattn translate`` end to end on a tiny trained checkpoint: CoNLL-U and raw-text input reproduce
the test translations written at training time."""

import pytest

from structattn import cli
from structattn.structures import write_conllu
from structattn.tasks.base import get_task
from tests.seq2seq.test_experiment import run_tiny

TASK = dict(train=120, dev=12, test=12, grammar_depth=1, max_words=9, beam=2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("translate")
    records = run_tiny(tmp, "{'full': 'full', 'soft': 'soft_bias(dependency)'}", steps=40)
    runs = {r["setting"]: tmp / "out" / "runs" / r["run_id"] for r in records}
    return tmp, runs


def test_conllu_input_reproduces_the_test_translations(trained, capsys):
    tmp, runs = trained
    test = get_task("translation_synthetic", **TASK).splits()["test"]
    source = tmp / "test.conllu"
    write_conllu(test, source)
    out = tmp / "soft.txt"
    assert cli.main(["translate", str(runs["soft"] / "checkpoints" / "best.pt"), str(source), "--out", str(out),
                     "--beam", "2", "--quiet"]) == 0
    assert out.read_text() == (runs["soft"] / "test.hyp.txt").read_text()
    assert "translated 12 sentences" in capsys.readouterr().out


def test_raw_text_for_a_model_without_structure(trained):
    tmp, runs = trained
    test = get_task("translation_synthetic", **TASK).splits()["test"]
    source = tmp / "test.txt"
    source.write_text("".join(" ".join(s.words) + "\n" for s in test))
    out = tmp / "full.txt"
    assert cli.main(["translate", str(runs["full"] / "checkpoints" / "best.pt"), str(source), "--out", str(out),
                     "--beam", "2", "--quiet"]) == 0
    assert out.read_text() == (runs["full"] / "test.hyp.txt").read_text()


def test_raw_text_for_a_tree_model_without_parser_is_refused(trained, capsys):
    tmp, runs = trained
    source = tmp / "raw.txt"
    source.write_text("the dog sees a cat .\n")
    assert cli.main(["translate", str(runs["soft"] / "checkpoints" / "best.pt"), str(source), "--out",
                     str(tmp / "x.txt")]) == 1
    assert "records no parser" in capsys.readouterr().err
