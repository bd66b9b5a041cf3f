"""The seq2seq runner on Multi30k (the 100-line fixture): a learned subword vocabulary trained on train only,
cased detokenised sacreBLEU / chrF / tokenised lowercased BLEU in the records, raw references in the
predictions, and a checkpoint whose subword vocabulary comes back in ``structattn eval`` and ``structattn
translate`` on raw English text."""

import csv
import gzip
import json
from pathlib import Path

import pytest
import sacrebleu
import torch

from structattn import cli
from structattn.experiments import gin_setup
from structattn.experiments.runners import seq2seq as runner
from structattn.experiments.translate_command import translator_from
from structattn.seq2seq.subword import SubwordVocab
from structattn.tasks.base import get_task

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "multi30k_small"
BEAM = 2


def raw_lines(name: str) -> list[str]:
    """The lines of one fixture file, read independently of the task."""
    return gzip.decompress((FIXTURE / name).read_bytes()).decode("utf-8").splitlines()


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """configs/experiments/multi30k_quick.gin shrunk to a tiny model and 20 steps, on the fixture."""
    tmp = tmp_path_factory.mktemp("m30k")
    task = (f'translation_multi30k(tgt="de", shared_vocab=True, decoder_layers=1, beam={BEAM}, '
            f'path="{FIXTURE}", cache_dir="{tmp / "cache"}")')
    gin_setup.parse("configs/experiments/multi30k_quick.gin", [
        "model.d_model = 32", "model.num_layers = 1", "model.num_heads = 2", "model.ffn_dim = 64",
        "training.max_steps = 20", "training.eval_every = 10", "training.warmup_steps = 5", "training.batch_size = 16",
        "data.subword_size = 300", f"compare.tasks = {{'m30k': '{task}'}}", "compare.threads = 1"])
    records = gin_setup.compare(tmp / "out", quiet=True, plots=False)
    return tmp, {r["setting"]: r for r in records}


def test_records_score_detokenised_hypotheses_against_the_raw_references(compared):
    tmp, records = compared
    raw = raw_lines("test_2016_flickr.de.gz")
    for record in records.values():
        metrics, predictions = record["metrics"], record["predictions"]
        assert {"bleu", "chrf", "bleu_tok_lower", "dev_bleu"} <= set(metrics)
        assert predictions["ref"] == raw  # the raw lines, not the tokens
        hyps = predictions["hyp"]
        assert metrics["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [raw]).score)  # what significance reads
        assert metrics["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [raw]).score)
        signature = record["scores_signature"]
        assert "case:mixed" in signature["bleu"] and "tok:13a" in signature["bleu"]
        assert "case:lc" in signature["bleu_tok_lower"] and "nc:6" in signature["chrf"]
        run = tmp / "out" / "runs" / record["run_id"]
        assert (run / "test.hyp.txt").read_text(encoding="utf-8").splitlines() == hyps
        saved = json.loads((tmp / "out" / "runs" / f"{record['run_id']}.json").read_text())
        assert saved["scores_signature"] == signature and saved["metrics"]["bleu_tok_lower"] == metrics["bleu_tok_lower"]
    rows = list(csv.DictReader((tmp / "out" / "results.csv").open()))
    assert {("full", "bleu_tok_lower"), ("soft_bias(dep)", "bleu_tok_lower")} <= {(r["setting"], r["metric"]) for r in rows}


class OracleModel:
    """Stands in for a model that writes the reference pieces exactly."""


def test_a_perfect_translation_scores_100_after_detokenisation(monkeypatch, tmp_path):
    """Hypotheses = the reference pieces: detokenised they give back the raw lines (cased BLEU ~100: Moses
    detokenisation of spaCy tokens is near-lossless on Multi30k), and tokenised lowercased BLEU is exactly 100;
    and the signatures say how."""
    task = get_task("translation_multi30k", path=str(FIXTURE), cache_dir=str(tmp_path), shared_vocab=True)
    data = runner.prepare_translation(task, {}, {"subword_model": "bpe", "subword_size": 300, "lowercase": False},
                                      quiet=True)
    monkeypatch.setattr(runner, "translate_examples", lambda model, examples, *a, **k: [e.target_ids for e in examples])
    scored = runner.score_split(OracleModel(), data, "train", beam=1)  # train: every character has a piece
    raw = raw_lines("train.de.gz")
    assert scored.refs == raw and scored.metrics["bleu_tok_lower"] == pytest.approx(100.0)
    assert scored.metrics["bleu"] > 97.0 and sum(h == r for h, r in zip(scored.hyps, raw)) >= 55
    assert any(", " in h for h in scored.hyps) and not any(h.endswith(" .") for h in scored.hyps)
    assert "case:mixed" in scored.signature["bleu"] and "case:lc" in scored.signature["bleu_tok_lower"]


def test_other_translation_tasks_keep_tokenised_scoring(monkeypatch):
    """Word-level synthetic data keep the old scoring: tokens joined with spaces, lowercased like the vocabulary."""
    task = get_task("translation_synthetic", train=30, dev=4, test=5, grammar_depth=1, max_words=8)
    data = runner.prepare_translation(task, {}, {"min_freq": 1}, quiet=True)
    monkeypatch.setattr(runner, "translate_examples", lambda model, examples, *a, **k: [e.target_ids for e in examples])
    scored = runner.score_split(OracleModel(), data, "train", beam=1)  # train: no unknown words
    assert scored.signature == {} and set(scored.metrics) == {"bleu", "chrf"}
    assert scored.refs == [" ".join(w.lower() for w in x.meta["target"]) for x in data.items["train"]]
    assert scored.hyps == scored.refs and scored.metrics["bleu"] == pytest.approx(100.0)


@pytest.mark.parametrize("shared", [True, False])
def test_the_subword_vocabulary_is_trained_on_train_only(monkeypatch, tmp_path, shared):
    task = get_task("translation_multi30k", path=str(FIXTURE), cache_dir=str(tmp_path), shared_vocab=shared)
    items = task.splits()
    seen, train = [], SubwordVocab.train.__func__

    def spy(cls, sentences, **options):
        sentences = list(sentences)
        seen.append(sentences)
        return train(cls, sentences, **options)

    monkeypatch.setattr(SubwordVocab, "train", classmethod(spy))
    data = runner.prepare_translation(task, {}, {"subword_model": "unigram", "subword_size": 250, "lowercase": False},
                                      quiet=True)
    sources, targets = [list(x.words) for x in items["train"]], [list(x.meta["target"]) for x in items["train"]]
    assert seen == ([sources + targets] if shared else [sources, targets])
    assert isinstance(data.vocab, SubwordVocab) and data.vocab.model == "unigram" and len(data.target_vocab) <= 250
    assert (data.vocab is data.target_vocab) == shared


def test_bad_subword_options_are_refused():
    with pytest.raises(ValueError, match="subword_chars"):
        gin_setup.learned_subwords("bpe", 100, {"subword_chars": 3})
    with pytest.raises(ValueError, match="'bpe', 'unigram'"):
        gin_setup.learned_subwords("wordpiece", 100, {})
    assert gin_setup.learned_subwords(None, 500, {}) == {"subword_model": "bpe", "subword_size": 500}


def test_eval_rescores_the_checkpoint_to_its_recorded_metrics(compared, capsys):
    tmp, records = compared
    record = records["soft_bias(dep)"]
    checkpoint = tmp / "out" / "runs" / record["run_id"] / "checkpoints" / "best.pt"
    loaded = translator_from(torch.load(checkpoint, weights_only=False))
    assert isinstance(loaded.source, SubwordVocab) and loaded.source.to_dict() == loaded.meta["vocab"]
    capsys.readouterr()
    assert cli.main(["eval", str(checkpoint), "--quiet"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for name in ("bleu", "chrf", "bleu_tok_lower"):
        assert scores[name] == record["metrics"][name], name
    assert scores["loss"] == record["metrics"]["test_loss"]


def test_translate_raw_english_with_the_recorded_parser(compared, capsys):
    """``structattn translate CHECKPOINT english.txt`` (raw text, parsed by the recorded spaCy parser) writes the
    run's test translations as text: the recorded (Moses-detokenised) hypotheses, line for line."""
    tmp, records = compared
    record = records["soft_bias(dep)"]
    run = tmp / "out" / "runs" / record["run_id"]
    english, german = tmp / "english.txt", tmp / "german.txt"
    english.write_text("\n".join(raw_lines("test_2016_flickr.en.gz")) + "\n", encoding="utf-8")
    assert cli.main(["translate", str(run / "checkpoints" / "best.pt"), str(english), "--out", str(german),
                     "--beam", str(BEAM), "--quiet"]) == 0
    lines = german.read_text(encoding="utf-8").splitlines()
    assert lines == record["predictions"]["hyp"]


def test_word_trees_reach_the_subword_pieces(tmp_path):
    """Every piece inherits its word's tree distances (``align_to_subwords``): for each pair of pieces, the
    aligned distance is the word-level distance of their words (0 within a word)."""
    from structattn.structures import get_provider

    task = get_task("translation_multi30k", path=str(FIXTURE), cache_dir=str(tmp_path), shared_vocab=True)
    provider = get_provider("dependency")
    data = runner.prepare_translation(task, {"dependency": provider}, {"subword_model": "bpe", "subword_size": 120,
                                                                       "lowercase": False}, quiet=True)
    cut = 0
    for item, example in zip(data.items["test"], data.examples["test"]):
        _, word_of = data.vocab.encode(list(item.words))
        words = provider(item).distance
        pieces = example.structures["dependency"].distance
        assert pieces.shape == (len(example.input_ids),) * 2
        expected = words[torch.tensor(word_of)][:, torch.tensor(word_of)]
        assert torch.equal(pieces, expected), item.id
        cut += len(word_of) > len(item.words)
    assert cut >= 10  # a 120-piece vocabulary cuts most test sentences' words


def test_gradient_norms_script_splits_a_checkpoints_gradient_by_part(compared, capsys, monkeypatch):
    """scripts/gradient_norms.py on a run's checkpoint: per-part norms whose total is torch's own total norm,
    one line per draw; a missing checkpoint or corpus exits 2 with the reason."""
    import importlib.util
    import re

    spec = importlib.util.spec_from_file_location("gradient_norms", Path("scripts/gradient_norms.py").resolve())
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    tmp, records = compared
    checkpoint = tmp / "out" / "runs" / records["soft_bias(dep)"]["run_id"] / "checkpoints" / "best.pt"
    monkeypatch.delenv("STRUCTATTN_MULTI30K", raising=False)
    assert script.main([str(checkpoint)]) == 2 and "set STRUCTATTN_MULTI30K" in capsys.readouterr().err
    assert script.main([str(tmp / "none.pt")]) == 2 and "none.pt does not exist" in capsys.readouterr().err
    monkeypatch.setenv("STRUCTATTN_MULTI30K", str(FIXTURE))
    assert script.main([str(checkpoint), "--pairs", "8", "--draws", "2"]) == 0
    out = capsys.readouterr().out
    assert f"(step {records['soft_bias(dep)']['best_step']}), 8 val pairs, label smoothing 0.1, clip_norm 1\n" in out
    assert len(re.findall(r"^draw \d: loss \d+\.\d+; gradient norm encoder [\d.e+-]+, decoder [\d.e+-]+, all "
                          r"[\d.e+-]+; clip factor [\d.e+-]+$", out, re.MULTILINE)) == 2
    # the parts add up to torch's total norm, and ssan's policy projections are a part of their own
    model = translator_from(torch.load(checkpoint, weights_only=False)).model
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    assert script.norms_by_part(model)["all"] == pytest.approx(float(total), rel=1e-6)
    assert script.part_of("encoder.layers.0.attention.variants.0.policy_key.weight") == "policy"
    assert [script.part_of(n) for n in ("encoder.embedding.weight", "decoder.output.weight")] == ["encoder", "decoder"]
