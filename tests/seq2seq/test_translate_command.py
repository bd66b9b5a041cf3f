"""``structattn translate`` end to end on tiny trained checkpoints: CoNLL-U and raw-text input reproduce
the test translations written at training time, also for subword models with position-based structures."""

import pytest
import torch

from structattn import cli
from structattn.experiments.run import make_providers
from structattn.experiments.translate_command import encode
from structattn.experiments.runners.seq2seq import prepare_translation
from structattn.structures import write_conllu
from structattn.tasks.base import get_task
from tests.seq2seq.test_experiment import run_tiny

TASK = dict(train=120, dev=12, test=12, grammar_depth=1, max_words=9, beam=2)
#: a subword vocabulary and a window: training builds the window on the tokens, not on the words
SUBWORDS = ("data.subword_chars = 3", "data.structures = {'win': 'window(radius=2)'}")


def write_test_split(path, raw: bool):
    """The task's test split as CoNLL-U, or (``raw``) as raw text, one whitespace-joined sentence per line."""
    test = get_task("translation_synthetic", **TASK).splits()["test"]
    if raw:
        path.write_text("".join(" ".join(s.words) + "\n" for s in test))
    else:
        write_conllu(test, path)
    return path


def check_translates_like_training(run, source, out) -> None:
    """``structattn translate`` of ``source`` with the run's best checkpoint gives its test translations."""
    assert cli.main(["translate", str(run / "checkpoints" / "best.pt"), str(source), "--out", str(out),
                     "--beam", "2", "--quiet"]) == 0
    assert out.read_text() == (run / "test.hyp.txt").read_text()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("translate")
    records = run_tiny(tmp, "{'full': 'full', 'soft': 'soft_bias(dependency)'}", steps=40)
    runs = {r["setting"]: tmp / "out" / "runs" / r["run_id"] for r in records}
    return tmp, runs


def test_conllu_input_reproduces_the_test_translations(trained, capsys):
    tmp, runs = trained
    check_translates_like_training(runs["soft"], write_test_split(tmp / "test.conllu", raw=False), tmp / "soft.txt")
    assert "translated 12 sentences" in capsys.readouterr().out


def test_raw_text_for_a_model_without_structure(trained):
    tmp, runs = trained
    check_translates_like_training(runs["full"], write_test_split(tmp / "test.txt", raw=True), tmp / "full.txt")


def test_raw_text_for_a_tree_model_without_parser_is_refused(trained, capsys):
    tmp, runs = trained
    source = tmp / "raw.txt"
    source.write_text("the dog sees a cat .\n")
    assert cli.main(["translate", str(runs["soft"] / "checkpoints" / "best.pt"), str(source), "--out",
                     str(tmp / "x.txt")]) == 1
    assert "records no parser" in capsys.readouterr().err


@pytest.fixture(scope="module")
def subword_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("translate_subwords")
    records = run_tiny(tmp, "{'win': 'local_global(win)', 'mixed': 'hard_mask(dependency)*1 + local_global(win)'}",
                       steps=40, bindings=SUBWORDS)
    return tmp, {r["setting"]: tmp / "out" / "runs" / r["run_id"] for r in records}


def test_translate_encodes_like_training_with_subwords_and_a_window():
    task = get_task("translation_synthetic", **TASK)
    providers = make_providers(["dependency", "win"], {"win": "window(radius=2)"})
    data = prepare_translation(task, providers, {"subword_chars": 3}, quiet=True)
    test = task.splits()["test"]
    translated = encode(test, data.vocab, providers)
    assert any(len(e) > len(x) for e, x in zip(translated, test))  # the vocabulary does split words
    for trained, ours in zip(data.examples["test"], translated):
        assert ours.input_ids == trained.input_ids and ours.id == trained.id
        assert ours.structures.keys() == trained.structures.keys() == {"dependency", "win"}
        for name, expected in trained.structures.items():
            assert ours.structures[name].window_radius == expected.window_radius, (trained.id, name)
            for field in ("distance", "adjacency", "token_mask", "is_global"):
                a, b = getattr(expected, field), getattr(ours.structures[name], field)
                assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), (trained.id, name, field)


@pytest.mark.parametrize("setting", ["win", "mixed"])
def test_subword_window_model_reproduces_the_test_translations(subword_runs, setting):
    tmp, runs = subword_runs
    check_translates_like_training(runs[setting], write_test_split(tmp / "test.conllu", raw=False),
                                   tmp / f"{setting}.txt")


def test_raw_text_for_a_window_model_needs_no_parser(subword_runs):
    """A window reads positions only: raw text is split on whitespace, as for a model without structure."""
    tmp, runs = subword_runs
    check_translates_like_training(runs["win"], write_test_split(tmp / "test.txt", raw=True), tmp / "win_raw.txt")
