"""Comparisons: validation before training, records, plots, sharding and merging, checkpoint evaluation."""

import json

import pytest

from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, evaluate_checkpoint, merge, parse_shard, run_comparison
from structattn.training import TrainConfig, load_checkpoint

TASK = "depth_tagging(limit=30, max_depth=3)"
SETUP = Setup(EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=32, dropout=0.1),
              TrainConfig(lr=3e-3, warmup_steps=2, max_steps=6, batch_size=8, eval_every=3, patience=0))


def comparison(settings=None, tasks=None, setup=SETUP):
    settings = settings or {"full": "full", "soft_bias(dep)": "soft_bias(dependency)"}
    return Comparison.declare(tasks or {"depth": TASK}, settings, [0], setup)


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory):
    out = tmp_path_factory.mktemp("all")
    records = run_comparison(comparison(), out, quiet=True, config="compare.seeds = [0]")
    return out, records


def test_outputs_of_a_comparison(unsharded):
    out, records = unsharded
    assert (out / "config.gin").read_text() == "compare.seeds = [0]"
    assert [r["setting"] for r in records] == ["full", "soft_bias(dep)"]
    full, soft = records
    assert set(full["metrics"]) == {"test_accuracy", "dev_accuracy", "test_loss", "majority_baseline"}
    assert [h["step"] for h in full["history"]] == [3, 6]
    assert full["bias"] == [] and [b["layer"] for b in soft["bias"]] == [0, 1]
    assert len(soft["bias"][0]["labels"]) == len(soft["bias"][0]["values"][0])
    heat = soft["heatmap"]
    assert len(heat["layers"]) == 2 and len(heat["layers"][0]) == len(heat["tokens"])
    assert len(heat["gold"]) == 2 * (len(heat["tokens"]) - 1)  # both directions of every tree arc
    lines = (out / "results.csv").read_text().splitlines()
    assert len(lines) == 1 + 2 * 4
    assert "| setting | test accuracy | dev accuracy | seeds |" in (out / "results.md").read_text()
    pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert pngs == ["attention_depth_full.png", "attention_depth_soft-bias-dep.png", "bias_depth_soft-bias-dep.png",
                    "learning_curves.png", "scores.png"]
    assert all((out / "plots" / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    assert (out / "runs" / records[0]["run_id"] / "checkpoints" / "best.pt").is_file()


def test_shards_merge_to_the_unsharded_tables(unsharded, tmp_path):
    out, _ = unsharded
    shards = [tmp_path / "s0", tmp_path / "s1"]
    for k, d in enumerate(shards):
        part = run_comparison(comparison(), d, shard=(k, 2), quiet=True, config="compare.seeds = [0]", plots=False)
        assert [r["index"] for r in part] == [k]
    assert "Partial: 1 of 2 runs" in (shards[0] / "results.md").read_text()
    merged = merge(shards, tmp_path / "merged", plots=False)
    assert [r["index"] for r in merged] == [0, 1]
    for name in ("results.csv", "significance.csv", "results.md", "config.gin"):
        assert (tmp_path / "merged" / name).read_text() == (out / name).read_text(), name
    with pytest.raises(ValueError, match=r"runs \[1\] are in none"):
        merge(shards[:1], tmp_path / "partial")


def test_merge_refuses_different_comparisons(unsharded, tmp_path):
    out, _ = unsharded
    other = tmp_path / "other"
    other.mkdir()
    manifest = json.loads((out / "comparison.json").read_text())
    (other / "comparison.json").write_text(json.dumps({**manifest, "fingerprint": "0" * 16}))
    with pytest.raises(ValueError, match="different comparison"):
        merge([out, other], tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="no comparison.json"):
        merge([tmp_path], tmp_path / "m")


def test_checkpoint_rebuilds_and_scores_like_the_run(unsharded):
    out, records = unsharded
    data = load_checkpoint(out / "runs" / records[1]["run_id"] / "checkpoints" / "best.pt")
    assert data["config"] == "compare.seeds = [0]" and data["meta"]["plan"] == "soft_bias(dependency)"
    scores = evaluate_checkpoint(data, "test", quiet=True)
    assert scores["accuracy"] == pytest.approx(records[1]["metrics"]["test_accuracy"], abs=1e-9)
    # the task's options are recorded; a rebuilt task whose options differ (a default changed) is refused
    recorded = data["meta"]["task_options"]
    assert recorded["limit"] is not None and "max_depth" in recorded
    changed = {**data, "meta": {**data["meta"], "task_options": {**recorded, "max_depth": recorded["max_depth"] + 1}}}
    with pytest.raises(ValueError, match=r"the checkpoint was trained with .*differing: \['max_depth'\]"):
        evaluate_checkpoint(changed, "test", quiet=True)
    # checkpoints written before options were recorded still evaluate
    older = {**data, "meta": {k: v for k, v in data["meta"].items() if k != "task_options"}}
    assert evaluate_checkpoint(older, "test", quiet=True)["accuracy"] == scores["accuracy"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"settings": {"x": "sparse(dependency)"}}, "setting 'x': unknown attention variant 'sparse'"),
        ({"settings": {"x": "soft_bias(tree)"}}, "unknown structure provider 'tree'"),
        ({"settings": {"x": "local_global(dependency)"}}, r"needs structure field\(s\) \['band'\]"),
        ({"settings": {"x": "soft_bias(dependency, radius=2)"}}, "bad options"),
        ({"tasks": {"t": "parsing()"}}, "unknown task 'parsing'"),
        ({"tasks": {"t": "depth_tagging(depth=3)"}}, "task 'depth_tagging': bad options"),
    ],
)
def test_bad_names_fail_before_any_training(kwargs, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        run_comparison(comparison(**kwargs), tmp_path / "out", quiet=True)
    assert not (tmp_path / "out").exists()


def test_declaration_errors():
    with pytest.raises(ValueError, match="distinct integers"):
        Comparison.declare(["t"], ["full"], [0, 0], SETUP)
    with pytest.raises(ValueError, match="list or a dict"):
        Comparison.declare("depth_tagging()", ["full"], [0], SETUP)
    runs = Comparison.declare(["a()", "b()"], ["full", "x"], [3, 4], SETUP).runs()
    assert [(r.index, r.task, r.plan, r.seed) for r in runs[:3]] == [(0, "a()", "full", 3), (1, "a()", "full", 4), (2, "a()", "x", 3)]


def test_parse_shard():
    assert parse_shard("1/3") == (1, 3) and parse_shard(None) is None
    for bad in ("3/3", "1-3", "a/b", "-1/2"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)
