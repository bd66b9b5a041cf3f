"""`structattn probe CHECKPOINT.pt`: a tiny trained structattn model (subword input, three structures) probed
on the bundled treebank, from the CLI and from Python."""

from __future__ import annotations

import csv
import math

import pytest
import torch

from structattn import cli
from structattn.encoders import EncoderConfig
from structattn.experiments import RunSpec, Setup, execute, make_providers, make_task, prepare_data
from structattn.experiments.probe_checkpoint import encode, encode_sentences, probe_checkpoint, rebuild
from structattn.structures import bundled_treebank, load_bundled
from structattn.training import TrainConfig, load_checkpoint, make_batch

SETUP = Setup(EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=32, dropout=0.0),
              TrainConfig(lr=3e-3, warmup_steps=2, max_steps=4, batch_size=8, eval_every=2, patience=0),
              structures={"win": "window(radius=2)"}, vocab={"subword_chars": 3})
#: layer 0: head 0 sees only its tree neighbours, head 1 a window; layer 1: both heads biased by semantic edges
PLAN = "hard_mask(dependency)*1 + local_global(win)@0; soft_bias(semantic)"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    torch.set_num_threads(1)
    providers = make_providers(["dependency", "semantic", "win"], SETUP.structures)
    data = prepare_data(make_task("depth_tagging(limit=20)"), providers, SETUP.vocab, quiet=True)
    execute(RunSpec(0, "depth", "depth_tagging(limit=20)", "split", PLAN, 0), SETUP, data, out_dir=out, quiet=True)
    return out / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def cli_rows(checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    argv = ["probe", str(checkpoint), "--treebank", str(bundled_treebank()), "--limit", "30", "--out", str(out),
            "--epochs", "2", "--quiet"]
    assert cli.main(argv) == 0
    assert (out / "probe.png").stat().st_size > 0 and "| random control | 2 |" in (out / "probe.md").read_text()
    return list(csv.DictReader(open(out / "probe.csv")))


def test_every_layer_probe_and_head_has_a_finite_row_in_range(cli_rows):
    assert list(cli_rows[0]) == ["model", "layer", "head", "probe", "metric", "value"]
    assert {r["model"] for r in cli_rows} == {"000_depth_split_s0", "random control"}
    for model in ("000_depth_split_s0", "random control"):
        mine = [r for r in cli_rows if r["model"] == model]
        found = {(r["layer"], r["probe"], r["metric"]) for r in mine if r["head"] == ""}
        for layer in ("0", "1", "2"):  # 0: embeddings, 1-2: the two encoder layers
            assert {(layer, "structural_distance", "uuas"), (layer, "structural_distance", "spearman"),
                    (layer, "structural_depth", "root_acc"), (layer, "structural_depth", "spearman")} <= found
        for layer in ("1", "2"):  # attention inside layers 1-2 (1-based)
            assert {(layer, "tree_induction", m) for m in ("best_head_uuas", "random_baseline",
                                                           "right_branching_baseline")} <= found
        heads = {(r["layer"], r["head"]) for r in mine if r["probe"] == "tree_induction" and r["head"] != ""}
        assert heads == {(layer, h) for layer in ("1", "2") for h in ("0", "1")}
    for r in cli_rows:
        value = float(r["value"])
        assert math.isfinite(value) and (-1 <= value <= 1 if r["metric"] == "spearman" else 0 <= value <= 1), r


def test_python_gives_the_cli_numbers(checkpoint, cli_rows):
    rows = probe_checkpoint(checkpoint, load_bundled(30), epochs=2, progress=False)
    assert [(r["model"], str(r["layer"]), str(r["head"]), r["probe"], r["metric"]) for r in rows] == \
        [(r["model"], r["layer"], r["head"], r["probe"], r["metric"]) for r in cli_rows]
    assert [r["value"] for r in rows] == [float(r["value"]) for r in cli_rows]


def test_the_tree_masked_head_is_layer_1_head_0_and_recovers_the_tree(cli_rows):
    """hard_mask(dependency) lets a word attend only to its tree neighbours: after pooling its pieces, the
    spanning tree of its attention is the gold tree (punctuation excluded), so UUAS is 1; the control's too."""
    for model in ("000_depth_split_s0", "random control"):
        (row,) = [r for r in cli_rows if r["model"] == model and (r["layer"], r["head"], r["metric"]) == ("1", "0", "uuas")]
        assert float(row["value"]) == pytest.approx(1.0)


def test_states_are_embeddings_then_layer_outputs_read_at_first_pieces(checkpoint):
    data = load_checkpoint(checkpoint)
    make, vocab, providers = rebuild(data)
    model = make()
    model.load_state_dict(data["model"])
    examples = encode_sentences([s for s in load_bundled(6) if len(s) < 25][:3], vocab, providers, progress=False)
    states, attentions = encode(model, examples, progress=False)
    assert len(states) == 3 and [a.shape[1] for a in attentions] == [2, 2]
    batch = make_batch(examples, "token")
    words, word_mask, _ = model.encode_words(batch)
    torch.testing.assert_close(states[-1], words * word_mask[..., None])  # last: the encoder output
    starts, _ = batch.word_starts
    encoder = model.encoder
    assert encoder.positions is not None
    with torch.no_grad():  # Encoder.forward's first lines, by hand
        embedded = encoder.embedding(batch.input_ids) * math.sqrt(encoder.d_model)
        embedded = embedded + encoder.positions(batch.input_ids.shape[1])  # (b, n, d)
    first = embedded.gather(1, starts[..., None].expand(-1, -1, embedded.shape[-1])) * word_mask[..., None]
    torch.testing.assert_close(states[0], first)  # layer 0: embeddings plus positions


def test_a_structure_the_treebank_cannot_give_is_named(checkpoint):
    sentences = load_bundled(12)
    for s in sentences:
        s.edges = None  # a basic-UD treebank: no enhanced edges
    with pytest.raises(ValueError, match=r"structure 'semantic' cannot be built on this treebank: provider "
                                         r"'semantic' needs 'edges'"):
        probe_checkpoint(checkpoint, sentences, epochs=1, progress=False)


def test_layers_probes_and_no_control(checkpoint, tmp_path):
    out = tmp_path / "probe"
    assert cli.main(["probe", str(checkpoint), "--treebank", str(bundled_treebank()), "--limit", "12", "--out",
                     str(out), "--layers", "2", "--probes", "tree_induction", "--no-control", "--quiet"]) == 0
    rows = list(csv.DictReader(open(out / "probe.csv")))
    assert {(r["model"], r["layer"], r["probe"]) for r in rows} == {("000_depth_split_s0", "2", "tree_induction")}
    text = tmp_path / "notes.pt"
    text.write_text("not a checkpoint\n")
    with pytest.raises(ValueError, match="is a text file, not a structattn checkpoint"):
        probe_checkpoint(text, load_bundled(4))
