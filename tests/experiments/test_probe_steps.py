"""Probe steps after training: tree induction through the step (UUAS 1.0 on attention forced onto the gold
tree), structural probes, accuracy per attractor count, step cost; metrics reach results.csv / results.md;
a tiny model beats the majority baseline on a task with an obvious signal."""

import sys

import pytest
import torch

from structattn.encoders import EncoderConfig
from structattn.experiments import (
    Comparison,
    RunSpec,
    Setup,
    build_model,
    execute,
    make_providers,
    make_task,
    prepare_data,
    run_comparison,
)
from structattn.experiments.probe_steps import (
    check_probe_steps,
    make_probe_step,
    run_probe_steps,
)
from structattn.training import TrainConfig

MODEL = EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=32, dropout=0.0)
SHORT = TrainConfig(lr=3e-3, warmup_steps=2, max_steps=4, batch_size=8, eval_every=2, patience=0)
AGREEMENT = "agreement(attractors=[0, 1], train=24, dev=8, test=16)"


def test_tree_induction_on_attention_forced_onto_the_gold_tree_scores_one(tmp_path):
    """hard_mask(dependency) lets a word attend only to itself and its tree neighbours, so every head's
    symmetrised attention is positive exactly on the gold edges and its spanning tree is the gold tree."""
    setup = Setup(MODEL, SHORT, probes=("tree_induction(max_items=12)",))
    comparison = Comparison.declare(["depth_tagging(limit=40)"], ["hard_mask(dependency)", "full"], [0], setup)
    records = run_comparison(comparison, tmp_path, quiet=True, plots=False)
    forced, free = (r["metrics"] for r in records)
    per_head = {k: v for k, v in forced.items() if k.startswith("tree_uuas_L")}
    assert sorted(per_head) == [f"tree_uuas_L{l}H{h}" for l in range(2) for h in range(2)]
    assert all(v == pytest.approx(1.0) for v in per_head.values())
    assert forced["tree_uuas_best"] == pytest.approx(1.0)
    assert 0 < forced["tree_uuas_random"] < 0.5 and 0 < forced["tree_uuas_right_branching"] < 1
    assert free["tree_uuas_best"] < 1.0  # an untrained full-attention model does not find the tree
    csv = (tmp_path / "results.csv").read_text()
    assert "tree_uuas_L1H1" in csv and "tree_uuas_random" in csv
    assert "tree uuas best" in (tmp_path / "results.md").read_text()


@pytest.fixture(scope="module")
def trained():
    torch.set_num_threads(1)
    task = make_task(AGREEMENT)
    data = prepare_data(task, make_providers(["dependency"], {}), {}, quiet=True)
    spec = RunSpec(0, "agr", AGREEMENT, "full", "full", 0)
    setup = Setup(MODEL, SHORT, probes=("structural_distance(epochs=2)", "structural_depth(epochs=2)",
                                        "by_attractors", "step_cost(batch_size=4, repeats=2)"))
    record = execute(spec, setup, data, quiet=True)
    return record, data


def test_structural_probe_metrics_are_scores(trained):
    metrics = trained[0]["metrics"]
    for key in ("dist_uuas", "dist_spearman", "depth_root_acc", "depth_spearman"):
        assert key in metrics and -1.0 <= metrics[key] <= 1.0, key
    assert 0 <= metrics["dist_uuas"] <= 1 and 0 <= metrics["depth_root_acc"] <= 1


def test_accuracy_per_attractor_count_averages_to_test_accuracy(trained):
    metrics, data = trained[0]["metrics"], trained[1]
    counts = [x.meta["num_attractors"] for x in data.items["test"]]
    per = {c: metrics[f"acc_attractors_{c}"] for c in (0, 1)}
    mean = sum(per[c] * counts.count(c) for c in per) / len(counts)
    assert mean == pytest.approx(metrics["test_accuracy"])
    assert metrics["step_ms"] > 0 and metrics["step_peak_mib"] > 0


def test_cpu_peak_memory_follows_the_score_matrix():
    """A softmax over an n x n score matrix and its backward: the peak grows as n^2 (two n x n buffers)."""
    from structattn.experiments.probe_steps import cpu_peak_mib

    peaks = []
    for n in (128, 256):
        z = torch.randn(n, 16, requires_grad=True)
        peaks.append(cpu_peak_mib(lambda: (z @ z.T).softmax(-1).sum().backward()))
    assert peaks[0] >= 4 * 128 * 128 / 2**20
    assert peaks[1] == pytest.approx(4 * peaks[0], rel=0.1)


def test_cpu_peak_memory_keeps_stderr_but_drops_the_profiler_announcements(capfd):
    """torch's profiler writes a "USDT:... profiler_start/stop" line per use to file descriptor 2; the step
    hides those lines and keeps everything else written there during the measured call."""
    import os

    from structattn.experiments.probe_steps import cpu_peak_mib

    def noisy():
        os.write(2, b"USDT: a native line to drop\nnative line to keep\n")
        print("python line to keep", file=sys.stderr)
        torch.randn(64, 64).sum()

    cpu_peak_mib(noisy)
    err = capfd.readouterr().err
    assert "native line to keep" in err and "python line to keep" in err
    assert "USDT" not in err


def test_steps_reject_unknown_names_bad_options_and_unfit_tasks():
    with pytest.raises(ValueError, match="unknown probe step"):
        check_probe_steps(["tree_inducton"])
    with pytest.raises(ValueError, match="bad options"):
        make_probe_step("tree_induction(layers=3)")
    with pytest.raises(ValueError, match="string"):
        check_probe_steps("tree_induction")
    task = make_task("doc_agreement(num_sentences=2, train=2, dev=1, test=1)")
    data = prepare_data(task, {}, {}, quiet=True)
    model = build_model(task, len(data.vocab), "full", MODEL, {})
    with pytest.raises(ValueError, match="is not a Sentence with gold heads"):
        run_probe_steps(["tree_induction"], model, data, data.examples, 0)
    with pytest.raises(ValueError, match="by_attractors"):
        run_probe_steps(["by_attractors"], model, data, data.examples, 0)


def test_a_tiny_model_beats_the_majority_baseline_on_an_obvious_signal():
    """Agreement without attractors: the only noun before the verb decides its number."""
    spec = "agreement(attractors=[0], train=200, dev=40, test=100)"
    task = make_task(spec)
    data = prepare_data(task, {}, {}, quiet=True)
    setup = Setup(EncoderConfig(d_model=32, num_layers=1, num_heads=2, ffn_dim=64, dropout=0.0),
                  TrainConfig(lr=5e-3, warmup_steps=10, max_steps=120, batch_size=16, eval_every=40, patience=0))
    record = execute(RunSpec(0, "agr", spec, "full", "full", 0), setup, data, quiet=True)
    assert record["metrics"]["majority_baseline"] == pytest.approx(0.5)
    assert record["metrics"]["test_accuracy"] >= record["metrics"]["majority_baseline"] + 0.2


def test_bias_table_averages_heads_then_seeds_and_marks_the_largest_bucket():
    from structattn.experiments.bias_table import bias_markdown, bias_rows

    def record(seed, values):
        return {"task_label": "t", "setting": "soft", "seed": seed,
                "bias": [{"layer": 0, "group": "g", "labels": ["0", "1", "2", "unreachable"], "values": values}]}

    records = [record(0, [[0.0, 1.0, 0.5, 0.0], [0.2, 3.0, 0.5, 0.0]]), record(1, [[0.1, 1.0, 0.0, 0.0]])]
    (row,) = bias_rows(records)
    assert row["mean"] == pytest.approx([0.1, 1.5, 0.25, 0.0]) and row["runs"] == 2
    assert row["std"][1] == pytest.approx(2 ** 0.5 / 2)
    table = bias_markdown(records)
    assert "**+1.50 ± 0.71**" in table and "unreachable" not in table
    assert bias_markdown([{"task_label": "t", "setting": "full", "bias": []}]).startswith("No run")


def test_bias_peaks_name_each_seeds_largest_bucket_per_layer_and_count_the_agreeing_seeds():
    from structattn.experiments.bias_table import bias_peaks, peak_markdown

    labels = ["0", "1", "2", "unreachable"]

    def record(seed, layer0, layer1):
        return {"task_label": "t", "setting": "soft", "seed": seed, "run_id": f"r{seed}",
                "bias": [{"layer": 0, "group": "g", "labels": labels, "values": layer0},
                         {"layer": 1, "group": "g", "labels": labels, "values": layer1},
                         {"layer": 1, "group": "g", "name": "sigma", "labels": ["sigma"], "values": [[9.0]]}]}

    records = [record(1, [[0.0, 2.0, 0.5, 9.0]], [[1.0, 0.0, 0.0, 0.0], [0.0, 1.5, 0.0, 0.0]]),  # heads: 0.5, 0.75
               record(0, [[0.0, 1.0, 0.5, 0.0]], [[3.0, 1.0, 0.0, 0.0]])]
    rows = bias_peaks(records)  # the unreachable bucket is left out; a sigma is not a bias table
    assert [(r["layer"], r["seeds"], r["peaks"]) for r in rows] == [(0, [0, 1], ["1", "1"]), (1, [0, 1], ["0", "1"])]
    table = peak_markdown(records)
    assert "| t | soft | 0 | s0: d=1, s1: d=1 | 2 of 2 |" in table and "| t | soft | 1 | s0: d=0, s1: d=1 | 1 of 2 |" in table
    assert "d=1 is the peak in every seed in 1 of 2 layers." in table
    assert bias_peaks(records, skip=("0", "1", "2"))[0]["peaks"] == ["unreachable", "unreachable"]
    with pytest.raises(ValueError, match="run 'r1', layer 0: every bucket is skipped"):
        bias_peaks(records, skip=labels)


class PositionOracle:
    """Stands in for a model on word reordering: logits that point tag 1 at the inserted word and tag 2 at the
    origin of each test item (``swap``: tag 1 points at the origin instead)."""

    def __init__(self, items, swap=False):
        self.items, self.swap, self.offset = items, swap, 0

    def __call__(self, batch):
        b, w = batch.labels.shape
        logits = torch.zeros(b, w, 3)
        for k in range(b):
            inserted, origin = self.items[self.offset + k].meta["label"]
            logits[k, origin if self.swap else inserted, 1] = 5.0
            logits[k, origin, 2] = 5.0
        self.offset += b
        return logits


def test_reorder_positions_scores_pointers_over_every_word(capsys):
    from collections import Counter

    data = prepare_data(make_task("ssan_word_reordering(limit=150)"), make_providers(["dependency"], {}), {}, quiet=True)
    step, test = make_probe_step("reorder_positions"), data.items["test"]
    perfect = step.run(PositionOracle(test), data, data.examples, 0, "cpu")
    assert perfect["pos_inserted_acc"] == perfect["pos_origin_acc"] == perfect["pos_both_acc"] == 1.0
    swapped = step.run(PositionOracle(test, swap=True), data, data.examples, 0, "cpu")
    assert swapped["pos_inserted_acc"] == 0.0 and swapped["pos_origin_acc"] == 1.0 and swapped["pos_both_acc"] == 0.0
    # the baselines guess the most frequent train position (counted here independently)
    train = [x.meta["label"] for x in data.items["train"]]
    for j, key in ((0, "pos_inserted_majority"), (1, "pos_origin_majority")):
        common = Counter(t[j] for t in train).most_common(1)[0][0]
        assert perfect[key] == pytest.approx(sum(x.meta["label"][j] == common for x in test) / len(test))
        assert perfect[key] < 0.3  # positions spread over whole sentences: far below the tags' 1/3
    # other tasks of the same comparison: no metrics, and a notice saying so
    other = prepare_data(make_task("ssan_bigram_shift(limit=30)"), make_providers(["dependency"], {}), {}, quiet=True)
    assert step.run(PositionOracle([]), other, other.examples, 0, "cpu") == {}
    assert "'reorder_positions': task 'ssan_bigram_shift' is not 'ssan_word_reordering'" in capsys.readouterr().err


@pytest.mark.parametrize("scoring", ["symmetric", "marecek_rosa", "directed_gold_root"])
def test_tree_induction_step_scores_each_scoring_without_punctuation(scoring):
    """The step's metrics are tree_induction_uuas on the model's word-level attention, punctuation excluded by
    default. An untrained hard_mask(dependency) model attends only along gold edges (and to itself), so the
    symmetric MST is the gold tree (the directed and Mareček-Rosa scorings need not be: a word may attend to
    its dependent more than its head gives it)."""
    from structattn.experiments.probe_steps import _pad_square, word_outputs
    from structattn.probes.tree_induction import right_branching_uuas, tree_induction_uuas

    task = make_task("depth_tagging(limit=30)")
    data = prepare_data(task, make_providers(["dependency"], {}), {}, quiet=True)
    model = build_model(task, len(data.vocab), "hard_mask(dependency)", MODEL, make_providers(["dependency"], {}))
    out = run_probe_steps([f"tree_induction(max_items=10, scoring={scoring!r})"], model, data, data.examples, 0)
    test = data.items["test"][:10]
    _, weights = word_outputs(model, data.examples["test"][:10], "token", "cpu", attention=True)
    n = max(len(s) for s in test)
    layers = [torch.stack([_pad_square(w[layer], n) for w in weights]) for layer in range(2)]
    rows = tree_induction_uuas(layers, test, scoring=scoring)
    assert {k: v for k, v in out.items() if k.startswith("tree_uuas_L")} == {
        f"tree_uuas_L{r['layer']}H{r['head']}": r["uuas"] for r in rows}
    if scoring == "symmetric":
        assert out["tree_uuas_best"] == pytest.approx(1.0)
    assert any(u == "PUNCT" for s in test for u in s.upos)
    assert out["tree_uuas_right_branching"] == right_branching_uuas(test, exclude_punct=True)
    assert out["tree_uuas_right_branching"] != right_branching_uuas(test, exclude_punct=False)
    with pytest.raises(ValueError, match="unknown scoring 'mst'"):
        make_probe_step("tree_induction(scoring='mst')")
    with pytest.raises(ValueError, match="gold_edges must be one of"):
        make_probe_step("structural_distance(gold_edges='mst')")
