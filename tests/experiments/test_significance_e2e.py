"""Significance end to end: real (tiny) comparisons write significance.csv and the "vs <reference>" table, shards
merge to the same bytes, and compare.reference travels from gin through comparison.json to merge."""

import csv
import json

import pytest

from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, gin_setup, merge, run_comparison
from structattn.training import TrainConfig

TASK = "depth_tagging(limit=30, max_depth=3)"
SETUP = Setup(EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=32, dropout=0.1),
              TrainConfig(lr=3e-3, warmup_steps=2, max_steps=6, batch_size=8, eval_every=3, patience=0))
SETTINGS = {"full": "full", "soft": "soft_bias(dependency)"}


def comparison():
    return Comparison.declare({"depth": TASK}, SETTINGS, [0, 1], SETUP)


def rows_of(folder):
    return list(csv.DictReader((folder / "significance.csv").open()))


def accuracy(records):
    """Accuracy of every test output of ``records`` together (all seeds)."""
    correct = sum(sum(r["predictions"]["correct"]) for r in records)
    return correct / sum(sum(r["predictions"]["total"]) for r in records)


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory):
    out = tmp_path_factory.mktemp("all")
    return out, run_comparison(comparison(), out, quiet=True, config="compare.seeds = [0, 1]", plots=False)


def test_a_real_comparison_tests_every_seed_and_the_pooled_items(unsharded):
    out, records = unsharded
    assert json.loads((out / "comparison.json").read_text())["reference"] is None  # default: "full"
    rows = rows_of(out)
    assert [(r["setting"], r["reference"], r["scope"], r["metric"]) for r in rows] == [
        ("soft", "full", scope, "test_accuracy") for scope in ("seed 0", "seed 1", "pooled")]
    assert [r["method"] for r in rows] == ["paired_bootstrap", "paired_bootstrap", "cluster_paired_bootstrap"]
    items = len(records[0]["predictions"]["ids"])
    assert items > 1 and all(r["predictions"]["ids"] == records[0]["predictions"]["ids"] for r in records)
    assert [int(r["n_items"]) for r in rows] == [items] * 3  # pooled: the same test items, each with 2 seeds
    by = {(r["setting"], r["seed"]): r for r in records}
    for row, seeds in zip(rows, ([0], [1], [0, 1])):
        want = accuracy([by["soft", s] for s in seeds]) - accuracy([by["full", s] for s in seeds])
        assert float(row["diff"]) == pytest.approx(want, abs=1e-6), row["scope"]
        assert float(row["ci_low"]) <= float(row["diff"]) <= float(row["ci_high"])
        assert 0 < float(row["p"]) <= float(row["p_holm"]) <= 1 and row["significant"] in ("True", "False")
    text = (out / "results.md").read_text()
    assert "vs full — test set, pooled over seeds; paired bootstrap over test items" in text
    assert "| soft | test accuracy | " in text
    assert f"{items} test items × 2 seeds; the pooled tests resample the {items} test items" in text


def test_shards_merge_to_the_same_bytes_and_keep_the_reference(unsharded, tmp_path):
    out, _ = unsharded
    shards = [tmp_path / "s0", tmp_path / "s1"]
    for k, folder in enumerate(shards):
        run_comparison(comparison(), folder, shard=(k, 2), quiet=True, config="compare.seeds = [0, 1]", plots=False)
        assert [r["scope"] for r in rows_of(folder)] == [f"seed {k}", "pooled"]  # shard k: both settings of seed k
    merge(shards, tmp_path / "merged", plots=False)
    for name in ("significance.csv", "results.md"):  # from per-item outputs: the same bytes
        assert (tmp_path / "merged" / name).read_bytes() == (out / name).read_bytes(), name
    # results.csv also holds float32 losses, whose last printed digit can differ between a run trained second in
    # a process and the same run trained first (measured: test_loss 1.335922 vs 1.335921 on an AMD EPYC): every
    # other field equal, every value to 1e-5
    merged, alone = (list(csv.DictReader((folder / "results.csv").open())) for folder in (tmp_path / "merged", out))
    assert [{k: v for k, v in r.items() if k != "value"} for r in merged] == [
        {k: v for k, v in r.items() if k != "value"} for r in alone]
    for got, want in zip(merged, alone):
        assert float(got["value"]) == pytest.approx(float(want["value"]), abs=1e-5), (got["run_id"], got["metric"])

    def set_reference(folder, value, drop=False):
        manifest = json.loads((folder / "comparison.json").read_text())
        manifest.pop("reference") if drop else manifest.update(reference=value)
        (folder / "comparison.json").write_text(json.dumps(manifest))

    for folder in shards:  # manifests written before compare.reference existed: the default reference
        set_reference(folder, None, drop=True)
    merge(shards, tmp_path / "old", plots=False)
    assert (tmp_path / "old" / "significance.csv").read_bytes() == (out / "significance.csv").read_bytes()

    set_reference(shards[0], "soft")
    with pytest.raises(ValueError, match="tests against reference setting None but .* against 'soft'"):
        merge(shards, tmp_path / "mixed", plots=False)
    set_reference(shards[1], "soft")
    merge(shards, tmp_path / "soft", plots=False)  # the manifests' reference, not the default
    assert json.loads((tmp_path / "soft" / "comparison.json").read_text())["reference"] == "soft"
    flipped, default = rows_of(tmp_path / "soft"), rows_of(out)
    assert [(r["setting"], r["reference"]) for r in flipped] == [("full", "soft")] * 3
    assert [float(r["diff"]) for r in flipped] == pytest.approx([-float(r["diff"]) for r in default], abs=2e-6)
    assert "vs soft — test set" in (tmp_path / "soft" / "results.md").read_text()


def test_an_unknown_reference_fails_before_any_training(tmp_path):
    with pytest.raises(ValueError, match=r"compare reference 'nope' is not one of the settings \['full', 'soft'\]"):
        run_comparison(comparison(), tmp_path / "out", quiet=True, reference="nope")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- translation: BLEU and chrF

def parse_translation(settings, *bindings):
    gin_setup.parse("configs/experiments/translation_quick.gin", [
        "training.max_steps = 20", "training.eval_every = 10", "training.warmup_steps = 5",
        "compare.tasks = {'syn': 'translation_synthetic(train=120, dev=12, test=12, grammar_depth=1, max_words=9, "
        "beam=2)'}", f"compare.settings = {settings}", "compare.threads = 1", *bindings])


def test_translation_comparison_tests_bleu_and_chrf_against_the_gin_reference(tmp_path):
    parse_translation("{'full': 'full', 'soft': 'soft_bias(dependency)'}", "compare.seeds = [0, 1]",
                      "compare.reference = 'soft'")
    records = gin_setup.compare(tmp_path / "out", quiet=True, plots=False)
    assert json.loads((tmp_path / "out" / "comparison.json").read_text())["reference"] == "soft"
    rows = rows_of(tmp_path / "out")
    assert [(r["setting"], r["reference"], r["scope"], r["metric"]) for r in rows] == [
        ("full", "soft", scope, metric) for scope in ("seed 0", "seed 1", "pooled") for metric in ("bleu", "chrf")]
    assert [r["method"] for r in rows] == ["sacrebleu_paired_bs"] * 4 + ["cluster_paired_bs"] * 2
    assert all(r["n_items"] == "12" and r["note"] == "" for r in rows)
    by = {(r["setting"], r["seed"]): r["metrics"] for r in records}
    for row in rows[:4]:  # per seed: the runs' own corpus scores
        seed = int(row["scope"].split()[1])
        want = by["full", seed][row["metric"]] - by["soft", seed][row["metric"]]
        assert float(row["diff"]) == pytest.approx(want, abs=1e-5), (row["scope"], row["metric"])
    from structattn.seq2seq.metrics import corpus_scores

    outputs = {s: [r["predictions"] for r in records if r["setting"] == s] for s in ("full", "soft")}
    pooled = {s: corpus_scores([h for o in outs for h in o["hyp"]], [x for o in outs for x in o["ref"]])
              for s, outs in outputs.items()}  # every seed's outputs together
    for row in rows[4:]:
        want = pooled["full"][row["metric"]] - pooled["soft"][row["metric"]]
        assert float(row["diff"]) == pytest.approx(want, abs=1e-5), row["metric"]
    text = (tmp_path / "out" / "results.md").read_text()
    assert "vs soft — test set, pooled over seeds" in text and "| full | bleu | " in text and "| full | chrf | " in text


def test_gin_reference_must_name_a_setting():
    parse_translation("{'full': 'full', 'soft': 'soft_bias(dependency)'}", "compare.reference = 'tree'")
    with pytest.raises(ValueError, match=r"compare.reference must be one of the setting labels \['full', 'soft'\], "
                                         "got 'tree'"):
        gin_setup.compare("unused", quiet=True, plots=False)
