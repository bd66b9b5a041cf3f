"""`structattn probe` and probe_model on the bundled treebank with a tiny model; word pooling vs loops."""

from __future__ import annotations

import csv

import pytest
import torch

import structattn.hf as H
from structattn.experiments.probe_cli import main
from structattn.experiments.probe_command import encode, probe_model, random_control
from structattn.hf.pooling import first_piece_states, piece_matrix, word_attention
from structattn.structures import bundled_treebank, load_bundled, write_conllu
from tests.hf.conftest import tiny_model


def test_word_attention_sums_key_pieces_and_averages_query_pieces():
    word_ids = [[None, 0, 0, 1, 2, 2, 2, None], [None, 0, 1, 1, None, None, None, None]]
    weights = torch.rand(2, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = word_attention(weights, piece_matrix(word_ids, 8).double())
    for k, ids in enumerate(word_ids):
        words = 1 + max(w for w in ids if w is not None)
        for v in range(words):
            queries = [t for t, w in enumerate(ids) if w == v]
            for u in range(words):
                keys = [t for t, w in enumerate(ids) if w == u]
                want = sum(weights[k, :, i, j] for i in queries for j in keys) / len(queries)
                torch.testing.assert_close(got[k, :, v, u], want)
    assert got[1, :, 2:, :].abs().max() == 0 and got[1, :, :, 2:].abs().max() == 0  # sentence 1 has 2 words


def test_first_piece_states_read_each_words_first_token():
    word_ids = [[None, 0, 0, 1, None], [None, 0, 1, 1, None]]
    hidden = torch.randn(2, 5, 4)
    got = first_piece_states(hidden, piece_matrix(word_ids, 5))
    torch.testing.assert_close(got[0], hidden[0, [1, 3]])
    torch.testing.assert_close(got[1], hidden[1, [1, 2]])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    path = tmp_path_factory.mktemp("tiny_bert")
    model = tiny_model("bert", tokenizer, max_position_embeddings=160)
    H.attach(model, "soft_bias(dependency)@0; full")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_probe_command_writes_table_csv_and_plot(model_dir, tmp_path, capsys):
    out = tmp_path / "probe"
    assert main([str(model_dir), "--treebank", str(bundled_treebank()), "--limit", "24", "--out", str(out),
                 "--epochs", "2", "--quiet"]) == 0
    rows = list(csv.DictReader(open(out / "probe.csv")))
    assert list(rows[0]) == ["model", "layer", "head", "probe", "metric", "value"]
    models = {r["model"] for r in rows}
    assert models == {model_dir.name, "random control"}
    layer_metrics = {(r["layer"], r["probe"], r["metric"]) for r in rows if r["model"] == "random control"}
    for layer in ("0", "1", "2"):
        assert {(layer, "structural_distance", "uuas"), (layer, "structural_depth", "root_acc")} <= layer_metrics
    heads = {(r["layer"], r["head"]) for r in rows if r["probe"] == "tree_induction" and r["metric"] == "uuas"}
    assert heads == {(layer, str(h)) for layer in ("1", "2") for h in range(4)}
    for r in rows:
        value = float(r["value"])
        assert value == value and (r["metric"] == "spearman" or 0 <= value <= 1), r
    assert (out / "probe.png").stat().st_size > 0 and "| random control | 2 |" in (out / "probe.md").read_text()
    assert "probe.csv" in capsys.readouterr().out
    python_rows = probe_model(H.from_pretrained(model_dir), _tokenizer(model_dir), load_bundled(24),
                              name=model_dir.name, epochs=2, progress=False)
    assert [float(r["value"]) for r in rows if r["model"] == model_dir.name] == [r["value"] for r in python_rows]


def _tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def test_attached_model_attention_follows_its_plan(model_dir):
    """Layer 1's word attention comes from the structattn soft_bias: a large table entry for distance 1 moves it."""
    model, tokenizer = H.from_pretrained(model_dir), _tokenizer(model_dir)
    sentences = [s for s in load_bundled(40) if len(s) < 20][:4]
    _, before = encode(model, tokenizer, sentences, progress=False)
    with torch.no_grad():
        H.attached_layers(model)[0].variants[0].table[1] = 10.0
    _, after = encode(model, tokenizer, sentences, progress=False)
    assert not torch.allclose(before[0], after[0])
    assert model.config._attn_implementation == "structattn_sdpa"  # restored after encoding with eager


def test_random_control_keeps_architecture_and_plan(model_dir):
    model = H.from_pretrained(model_dir)
    control = random_control(model, seed=1)
    assert type(control) is type(model) and set(H.attached_layers(control)) == {0}
    assert not torch.equal(control.embeddings.word_embeddings.weight, model.embeddings.word_embeddings.weight)


def test_unalignable_treebank_word_is_named(model_dir, tmp_path):
    sentences = load_bundled(4)
    words = sentences[3].words
    sentences[3].words = (*words[:2], "\u200b", *words[3:])  # a Sentence's words are a tuple: assign them whole
    sentences[3].id = "broken-1"
    path = tmp_path / "broken.conllu"
    write_conllu(sentences, path)
    with pytest.raises(ValueError, match=r"'broken-1'.*word 2"):
        main([str(model_dir), "--treebank", str(path), "--out", str(tmp_path / "o"), "--quiet", "--no-control",
              "--probes", "tree_induction"])


def test_layers_and_probes_can_be_chosen(model_dir, tmp_path):
    from structattn.experiments.probe_cli import parse_layers

    assert parse_layers("all") is None and parse_layers("0,2-3") == [0, 2, 3]
    with pytest.raises(ValueError, match="--layers"):
        parse_layers("x")
    out = tmp_path / "probe"
    main([str(model_dir), "--treebank", str(bundled_treebank()), "--limit", "12", "--out", str(out), "--layers", "2",
          "--probes", "tree_induction", "--no-control", "--quiet"])
    rows = list(csv.DictReader(open(out / "probe.csv")))
    assert {r["layer"] for r in rows} == {"2"} and {r["probe"] for r in rows} == {"tree_induction"}
    with pytest.raises(ValueError, match="unknown probes"):
        main([str(model_dir), "--treebank", str(bundled_treebank()), "--out", str(tmp_path / "o"), "--probes", "nope"])
    with pytest.raises(ValueError, match="not empty"):
        main([str(model_dir), "--treebank", str(bundled_treebank()), "--out", str(out)])
