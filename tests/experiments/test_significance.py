"""Paired significance tests: exact enumerations and plain loops as oracles, sacrebleu's PairedTest for BLEU/chrF."""

import itertools
import math
import os
import random
import statistics
from dataclasses import replace

import numpy as np
import pytest

from structattn.experiments.significance import (
    PairingError,
    SignificanceRow,
    accuracy_standard_error,
    approximate_randomisation_accuracy,
    bootstrap_accuracy_differences,
    cluster_accuracy_test,
    cluster_corpus_test,
    cluster_sums,
    compare_task,
    item_clusters,
    holm,
    minimum_detectable_effect,
    paired_bootstrap_accuracy,
    paired_corpus_test,
    resampled_corpus_scores,
    with_holm,
)

# four items with distinct totals, so that resampling the wrong axis or pairing the wrong items changes the numbers
REF = ([1, 0, 2, 3], [1, 2, 3, 4])
SYS = ([1, 2, 3, 3], [1, 2, 3, 4])


def accuracy(counts, items):
    return sum(counts[0][i] for i in items) / sum(counts[1][i] for i in items)


def exact_bootstrap(ref, sys):
    """Every one of the n^n equally likely resamples: the exact bootstrap distribution of the difference."""
    n = len(ref[0])
    return [accuracy(sys, idx) - accuracy(ref, idx) for idx in itertools.product(range(n), repeat=n)]


def test_bootstrap_draws_are_the_plain_loop_over_seeded_resamples():
    rng, n, loop = np.random.default_rng(7), len(REF[0]), []
    for _ in range(600):  # crosses the 256-resample chunks
        idx = [int(i) for i in rng.integers(0, n, size=n)]
        loop.append(accuracy(SYS, idx) - accuracy(REF, idx))
    assert bootstrap_accuracy_differences(REF, SYS, 600, seed=7).tolist() == pytest.approx(loop, abs=1e-15)
    result = paired_bootstrap_accuracy(REF, SYS, 600, seed=7)
    below, above = sum(d <= 0 for d in loop), sum(d >= 0 for d in loop)
    assert result.p == min(1.0, 2 * (1 + min(below, above)) / 601)
    assert (result.ci_low, result.ci_high) == pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])))
    assert result.diff == pytest.approx(9 / 10 - 6 / 10) and result.n_items == 4


def test_bootstrap_matches_the_exact_enumerated_distribution():
    exact = exact_bootstrap(REF, SYS)  # 256 resamples, each with probability 1/256
    share_not_better = sum(d <= 0 for d in exact) / len(exact)
    drawn = bootstrap_accuracy_differences(REF, SYS, 20000, seed=3)
    assert np.mean(drawn <= 0) == pytest.approx(share_not_better, abs=0.01)
    assert np.mean(drawn) == pytest.approx(statistics.fmean(exact), abs=0.005)
    result = paired_bootstrap_accuracy(REF, SYS, 20000, seed=3)
    assert result.p == pytest.approx(min(1.0, 2 * min(share_not_better, sum(d >= 0 for d in exact) / 256)), abs=0.02)


def exact_permutation_p(ref, sys):
    """The exact paired permutation test: all 2^n ways of swapping the two systems' outputs item by item."""
    n, observed = len(ref[0]), abs(accuracy(sys, range(len(ref[0]))) - accuracy(ref, range(len(ref[0]))))
    hits = 0
    for swaps in itertools.product((False, True), repeat=n):
        a = ([r if s else q for r, q, s in zip(ref[0], sys[0], swaps)], [r if s else q for r, q, s in zip(ref[1], sys[1], swaps)])
        b = ([q if s else r for r, q, s in zip(ref[0], sys[0], swaps)], [q if s else r for r, q, s in zip(ref[1], sys[1], swaps)])
        hits += abs(accuracy(a, range(n)) - accuracy(b, range(n))) >= observed - 1e-12
    return hits / 2**n


def test_approximate_randomisation_matches_the_exact_permutation_test():
    ref = ([1, 0, 2, 3, 1, 0, 4, 2], [1, 2, 3, 4, 2, 1, 5, 3])
    sys = ([1, 2, 3, 3, 2, 1, 4, 1], [1, 2, 3, 4, 2, 1, 5, 3])
    exact = exact_permutation_p(ref, sys)
    assert 0.05 < exact < 0.5  # a case where the approximation can be told apart from 0 or 1
    result = approximate_randomisation_accuracy(ref, sys, trials=20000, seed=5)
    assert result.p == pytest.approx(exact, abs=0.01)
    assert result.method == "approximate_randomisation"
    boot = paired_bootstrap_accuracy(ref, sys, 20000, seed=5)
    assert (result.diff, result.ci_low, result.ci_high) == (boot.diff, boot.ci_low, boot.ci_high)


def test_holm_hand_computed():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4 x 0.005, 3 x 0.01, 2 x 0.03, max(1 x 0.04, 0.06)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6, 0.01]) == pytest.approx([1.0, 1.0, 0.03])  # capped at 1, monotone
    assert holm([0.02]) == [0.02] and holm([]) == []
    with pytest.raises(ValueError, match="p-value 1 is nan"):
        holm([0.1, float("nan")])


def test_identical_systems_give_p_one_and_no_difference():
    for test in (paired_bootstrap_accuracy, approximate_randomisation_accuracy):
        result = test(REF, REF, 500, seed=1)
        assert (result.diff, result.ci_low, result.ci_high, result.p) == (0.0, 0.0, 0.0, 1.0)


def clearly_better(n=200, seed=0):
    rng = np.random.default_rng(seed)
    total = rng.integers(1, 6, n)
    return (rng.binomial(total, 0.5), total), (rng.binomial(total, 0.7), total)


def test_a_clearly_better_system_is_significant_and_a_worse_one_negative():
    ref, sys = clearly_better()
    for test in (paired_bootstrap_accuracy, approximate_randomisation_accuracy):
        better, worse = test(ref, sys, 1000, seed=2), test(sys, ref, 1000, seed=2)
        assert better.p < 0.05 and 0 < better.ci_low < better.diff < better.ci_high
        assert worse.p < 0.05 and worse.ci_high < 0 and worse.diff == pytest.approx(-better.diff)


def test_same_seed_same_numbers_other_seed_other_interval():
    ref, sys = clearly_better(60, seed=4)
    assert paired_bootstrap_accuracy(ref, sys, 300, seed=9) == paired_bootstrap_accuracy(ref, sys, 300, seed=9)
    assert approximate_randomisation_accuracy(ref, sys, 300, seed=9) == approximate_randomisation_accuracy(ref, sys, 300, seed=9)
    assert paired_bootstrap_accuracy(ref, sys, 300, seed=9).ci_low != paired_bootstrap_accuracy(ref, sys, 300, seed=10).ci_low


def test_bad_counts_name_the_culprit():
    with pytest.raises(PairingError, match="system: item 1 has correct 3 out of total 2"):
        paired_bootstrap_accuracy(REF, ([1, 3, 0, 0], [1, 2, 3, 4]))
    with pytest.raises(PairingError, match="reference has 4 items but system has 3"):
        paired_bootstrap_accuracy(REF, ([1, 1, 1], [1, 1, 1]))


def test_minimum_detectable_effect_and_standard_error_hand_computed():
    z = 1.959963984540054 + 0.8416212335729143
    assert minimum_detectable_effect(0.01) == pytest.approx(z * math.sqrt(2) * 0.01)
    # one target per item: the binomial p(1 - p) / (n - 1)
    correct = [1] * 30 + [0] * 70
    assert accuracy_standard_error(correct, [1] * 100) == pytest.approx(math.sqrt(0.3 * 0.7 / 99))
    # several targets per item: the ratio estimator, items as the unit
    c, t = [2, 0, 3], [2, 2, 4]
    p = 5 / 8
    want = math.sqrt(sum((ci - p * ti) ** 2 for ci, ti in zip(c, t)) / (2 * 3 * (8 / 3) ** 2))
    assert accuracy_standard_error(c, t) == pytest.approx(want)
    assert accuracy_standard_error([1, 1], [1, 1]) > 0  # all right: the smoothed binomial, not 0


# ---------------------------------------------------------------- BLEU / chrF through sacrebleu

def translations(n=40, seed=0):
    rng = random.Random(seed)
    words = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "house", "red", "small", "big"]
    refs = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) for _ in range(n)]

    def noisy(rate):
        return [" ".join(w if rng.random() > rate else "zz" for w in r.split()) for r in refs]

    return refs, noisy(0.5), noisy(0.2)


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_corpus_test_agrees_with_sacrebleus_paired_test(metric, monkeypatch):
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest, estimate_ci

    refs, worse, better = translations()
    monkeypatch.setenv("SACREBLEU_SEED", "777")
    ours = paired_corpus_test(worse, better, refs, metric, resamples=200, seed=4321)
    assert os.environ["SACREBLEU_SEED"] == "777"  # our temporary seed was put back
    monkeypatch.setenv("SACREBLEU_SEED", "4321")
    scorer = BLEU(force=True) if metric == "bleu" else CHRF()
    _, scores = PairedTest([("base", worse), ("new", better)], {metric: scorer}, [refs], test_type="bs",
                           n_samples=200)()
    base, new = next(v for k, v in scores.items() if k != "System")
    assert ours.p == new.p_value and ours.diff == pytest.approx(new.score - base.score)
    assert ours.reference_score == base.score and ours.method == "sacrebleu_paired_bs"
    # the interval comes from the very resamples sacrebleu drew: the system's resampled scores give its CI
    mean, half = estimate_ci(resampled_corpus_scores(better, refs, metric, 200, seed=4321))
    assert (mean, half) == pytest.approx((new.mean, new.ci))


def test_corpus_interval_is_the_corpus_metric_recomputed_on_resamples():
    import sacrebleu

    refs, worse, better = translations(12, seed=1)
    rng, diffs = np.random.default_rng(99), []
    for idx in rng.choice(len(refs), size=(30, len(refs)), replace=True):  # sacrebleu's draws
        r = [[refs[i] for i in idx]]
        diffs.append(sacrebleu.corpus_bleu([better[i] for i in idx], r, force=True).score
                     - sacrebleu.corpus_bleu([worse[i] for i in idx], r, force=True).score)
    ours = paired_corpus_test(worse, better, refs, "bleu", resamples=30, seed=99)
    assert (ours.ci_low, ours.ci_high) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), abs=1e-4)


def test_corpus_scores_are_the_ones_runs_report():
    from structattn.seq2seq.metrics import corpus_scores

    refs, worse, better = translations(15, seed=2)
    want = {k: corpus_scores(better, refs)[k] - corpus_scores(worse, refs)[k] for k in ("bleu", "chrf")}
    for metric in ("bleu", "chrf"):
        assert paired_corpus_test(worse, better, refs, metric, resamples=20).diff == pytest.approx(want[metric])


def test_corpus_test_identical_better_and_reproducible():
    refs, worse, better = translations()
    same = paired_corpus_test(worse, worse, refs, "bleu", resamples=100)
    assert (same.diff, same.ci_low, same.ci_high, same.p) == (0.0, 0.0, 0.0, 1.0)
    first = paired_corpus_test(worse, better, refs, "bleu", resamples=200, seed=8)
    assert first.p < 0.05 and first.ci_low > 0
    assert first == paired_corpus_test(worse, better, refs, "bleu", resamples=200, seed=8)
    ar = paired_corpus_test(worse, better, refs, "chrf", method="ar", resamples=200, seed=8)
    assert ar.method == "sacrebleu_paired_ar" and ar.p < 0.05
    with pytest.raises(PairingError, match="40 reference-system and 39 system hypotheses for 40 references"):
        paired_corpus_test(worse, better[:-1], refs)
    with pytest.raises(ValueError, match="seed 0 means 'unseeded'"):
        paired_corpus_test(worse, better, refs, seed=0)


# ---------------------------------------------------------------- run records: per seed, pooled, Holm

def run(setting, seed, counts, ids=None):
    n = len(counts[0])
    return {"run_id": f"{setting}_s{seed}", "setting": setting, "seed": seed, "metric": "accuracy",
            "predictions": {"split": "test", "ids": ids or [f"i{k}" for k in range(n)], "correct": list(counts[0]),
                            "total": list(counts[1])}}


def test_pooled_pairs_seed_with_seed_and_clusters_items():
    ref0, sys0 = clearly_better(30, seed=1)
    ref1, sys1 = clearly_better(30, seed=2)
    settings = {"full": [run("full", 1, ref1), run("full", 0, ref0)],  # out of seed order on purpose
                "tree": [run("tree", 0, sys0), run("tree", 1, sys1)]}
    rows = compare_task("t", settings, "full", resamples=200)
    assert [(r.scope, r.metric) for r in rows] == [("seed 0", "test_accuracy"), ("seed 1", "test_accuracy"),
                                                 ("pooled", "test_accuracy")]
    assert rows[0].result == paired_bootstrap_accuracy(ref0, sys0, 200)
    # pooled: item i of seed 0 and item i of seed 1 are one cluster, their counts summed
    summed = [np.add(a, b) for a, b in zip(ref0, ref1)], [np.add(a, b) for a, b in zip(sys0, sys1)]
    want = paired_bootstrap_accuracy(summed[0], summed[1], 200)
    assert rows[2].result == replace(want, method="cluster_paired_bootstrap") and rows[2].result.n_items == 30
    assert all(r.p_holm == r.result.p for r in rows)  # one comparison per scope: Holm changes nothing


# ---------------------------------------------------------------- pooled over seeds: items as clusters

def outputs(ids, correct, total=None):
    return {"ids": list(ids), "correct": list(correct), "total": list(total or [1] * len(correct))}


# two items a, b, two seeds, one target each; per item summed over seeds: ref a 2/2, b 0/2; sys a 1/2, b 2/2
TINY_REF = [outputs("ab", [1, 0]), outputs("ab", [1, 0])]
TINY_SYS = [outputs("ab", [1, 1]), outputs("ab", [0, 1])]


def test_cluster_bootstrap_hand_computed():
    """Resamples of the items (each with both seeds): {a, a}: 2/4 - 4/4 = -0.5 (probability 1/4); {a, b} in either
    order: 3/4 - 2/4 = +0.25 (1/2); {b, b}: 4/4 - 0/4 = +1 (1/4). Observed: 3/4 - 2/4. Resampling the four
    item-seed outputs independently would also give differences such as 0 or +0.5."""
    differences = bootstrap_accuracy_differences(([2, 0], [2, 2]), ([1, 2], [2, 2]), 4000, seed=3)
    result = cluster_accuracy_test(TINY_REF, TINY_SYS, resamples=4000, seed=3)
    assert set(differences.tolist()) == {-0.5, 0.25, 1.0}
    assert [np.mean(differences == d) for d in (-0.5, 0.25, 1.0)] == pytest.approx([0.25, 0.5, 0.25], abs=0.02)
    assert result.diff == 0.25 and (result.ci_low, result.ci_high) == (-0.5, 1.0)
    assert result.n_items == 2 and result.method == "cluster_paired_bootstrap" and result.reference_score == 0.5
    # p = 2 (1 + #{delta* <= 0}) / (B + 1), #{delta* <= 0} the {a, a} resamples
    assert result.p == min(1.0, 2 * (1 + np.count_nonzero(differences <= 0)) / 4001)
    assert result.p == pytest.approx(0.5, abs=0.04)


def test_cluster_randomisation_swaps_whole_items_exact():
    """AR pooled swaps an item in every seed at once: with all 2^n swap patterns it is the exact permutation test
    over items, computed here on the concatenated seed outputs (no shared code)."""
    rng = np.random.default_rng(11)
    n, seeds = 6, 3
    totals = [[int(t) for t in rng.integers(1, 4, n)] for _ in range(seeds)]
    ref = [outputs(range(n), [int(rng.binomial(t, 0.4)) for t in ts], ts) for ts in totals]
    sys = [outputs(range(n), [int(rng.binomial(t, 0.8)) for t in ts], ts) for ts in totals]

    def acc(runs, chosen):  # chosen[i]: which system's outputs item i takes, in every seed
        c = sum(runs[chosen[i]][s]["correct"][i] for s in range(seeds) for i in range(n))
        return c / sum(runs[chosen[i]][s]["total"][i] for s in range(seeds) for i in range(n))

    observed = abs(acc((sys, ref), [0] * n) - acc((sys, ref), [1] * n))
    hits = sum(abs(acc((sys, ref), swaps) - acc((ref, sys), swaps)) >= observed - 1e-12
               for swaps in itertools.product((0, 1), repeat=n))
    exact = hits / 2**n
    assert 0.05 < exact < 0.9
    result = cluster_accuracy_test(ref, sys, "ar", resamples=20000, seed=5)
    assert result.p == pytest.approx(exact, abs=0.01) and result.method == "cluster_approximate_randomisation"
    assert result.n_items == n


def test_duplicated_seeds_are_not_more_significant_than_one_seed():
    """Two systems differing on 1 item of 10, the same outputs in 5 seeds: 5 copies of one seed carry no more
    evidence than that seed, so the pooled test must not be more significant (concatenating the 50 outputs as
    independent items made p about 0.01)."""
    ref, sys = outputs(range(10), [0] + [1] * 9), outputs(range(10), [1] * 10)
    seed_alone = paired_bootstrap_accuracy((ref["correct"], ref["total"]), (sys["correct"], sys["total"]))
    pooled = cluster_accuracy_test([ref] * 5, [sys] * 5)
    assert pooled.p >= seed_alone.p and seed_alone.p > 0.5
    assert (pooled.diff, pooled.ci_low, pooled.ci_high) == (seed_alone.diff, seed_alone.ci_low, seed_alone.ci_high)
    naive = paired_bootstrap_accuracy((([0] + [1] * 9) * 5, [1] * 50), ([1] * 50, [1] * 50))
    assert naive.p < 0.05  # what the concatenation reported
    ar_alone = approximate_randomisation_accuracy((ref["correct"], ref["total"]), (sys["correct"], sys["total"]))
    assert cluster_accuracy_test([ref] * 5, [sys] * 5, "ar").p >= ar_alone.p
    settings = {"full": [run("full", s, (ref["correct"], ref["total"])) for s in range(5)],
                "tree": [run("tree", s, (sys["correct"], sys["total"])) for s in range(5)]}
    rows = compare_task("t", settings, "full")
    assert rows[-1].scope == "pooled" and rows[-1].result.p >= rows[0].result.p


def test_duplicated_seeds_bleu_is_not_more_significant_than_one_seed():
    refs, worse, _ = translations(10, seed=3)
    worse[0] = " ".join("zz" for _ in refs[0].split())
    better = worse[:]
    better[0] = refs[0]  # the systems differ on one sentence of ten
    ref_run, sys_run = ({"ids": list(range(10)), "hyp": h, "ref": refs} for h in (worse, better))
    for metric in ("bleu", "chrf"):
        alone = paired_corpus_test(worse, better, refs, metric, resamples=300)
        pooled = cluster_corpus_test([ref_run] * 5, [sys_run] * 5, metric, resamples=300)
        assert alone.p > 0.1 and pooled.p >= alone.p - 0.01, metric  # float32 resample sums: one resample may flip
        assert pooled.diff == pytest.approx(alone.diff)
        assert paired_corpus_test(worse * 5, better * 5, refs * 5, metric, resamples=300).p < 0.05  # concatenated


def test_clusters_follow_ids_not_positions():
    """Seeds listing items in other orders, or other items, still cluster by id (the k-th repeat of an id with
    the k-th repeat); clusters are numbered by first appearance."""
    cluster_of, m = item_clusters([{"ids": ["a", "b", "a"]}, {"ids": ["b", "a", "c"]}])
    assert m == 4 and [c.tolist() for c in cluster_of] == [[0, 1, 2], [1, 0, 3]]
    summed = cluster_sums([np.array([1, 2, 3]), np.array([10, 20, 30])], cluster_of, m)
    assert summed.tolist() == [1 + 20, 2 + 10, 3, 30]
    shuffled_ref = [TINY_REF[0], outputs("ba", [0, 1])]  # seed 1 lists b first: same clusters as TINY_REF
    shuffled_sys = [TINY_SYS[0], outputs("ba", [1, 0])]
    assert cluster_accuracy_test(shuffled_ref, shuffled_sys, resamples=300) == cluster_accuracy_test(
        TINY_REF, TINY_SYS, resamples=300)
    with pytest.raises(PairingError, match="paired run 1: the reference and the system list different item ids"):
        cluster_accuracy_test(TINY_REF, [TINY_SYS[0], outputs("ba", [1, 0])])


def cluster_oracle(ref_runs, sys_runs, metric, resamples, seed):
    """Plain loops: each resample's corpus score of every seed's outputs of the resampled items concatenated."""
    import sacrebleu

    corpus = sacrebleu.corpus_bleu if metric == "bleu" else sacrebleu.corpus_chrf
    kwargs = {"force": True} if metric == "bleu" else {}
    n, diffs = len(ref_runs[0]["ids"]), []
    for idx in np.random.default_rng(seed).choice(n, size=(resamples, n), replace=True):
        refs = [[r["ref"][i] for i in idx for r in ref_runs]]
        diffs.append(corpus([s["hyp"][i] for i in idx for s in sys_runs], refs, **kwargs).score
                     - corpus([r["hyp"][i] for i in idx for r in ref_runs], refs, **kwargs).score)
    return np.array(diffs)


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_cluster_corpus_bootstrap_is_the_concatenated_corpus_score_on_item_resamples(metric):
    import sacrebleu

    refs, worse, better = translations(12, seed=6)
    rng = random.Random(7)  # a second seed's outputs: the same references, other noise
    worse2, better2 = ([" ".join(w if rng.random() > rate else "zz" for w in r.split()) for r in refs]
                       for rate in (0.5, 0.2))
    ids = [f"s{k}" for k in range(12)]
    ref_runs = [{"ids": ids, "hyp": h, "ref": refs} for h in (worse, worse2)]
    sys_runs = [{"ids": ids, "hyp": h, "ref": refs} for h in (better, better2)]
    diffs = cluster_oracle(ref_runs, sys_runs, metric, 40, seed=99)
    ours = cluster_corpus_test(ref_runs, sys_runs, metric, resamples=40, seed=99)
    assert (ours.ci_low, ours.ci_high) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), abs=1e-3)
    magnitude = np.abs(diffs)
    corpus = sacrebleu.corpus_bleu if metric == "bleu" else sacrebleu.corpus_chrf
    kwargs = {"force": True} if metric == "bleu" else {}
    observed = (corpus(better + better2, [refs + refs], **kwargs).score
                - corpus(worse + worse2, [refs + refs], **kwargs).score)
    assert ours.diff == pytest.approx(observed)
    assert ours.p == (1 + np.count_nonzero(magnitude - magnitude.mean() > abs(observed) + 1e-9)) / 41
    assert ours.n_items == 12 and ours.method == "cluster_paired_bs"


@pytest.mark.parametrize("method", ["bootstrap", "ar"])
@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_cluster_corpus_test_of_one_seed_is_sacrebleus_paired_test(metric, method):
    """sacrebleu's PairedTest cannot cluster; with one seed (clusters of one) ours draws its indices and swaps and
    uses its p-value definitions, so the numbers are the same."""
    rng = random.Random(5)
    words = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "house", "red"]
    refs = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) for _ in range(25)]
    worse, better = ([" ".join(w if rng.random() > rate else "zz" for w in r.split()) for r in refs]
                     for rate in (0.3, 0.25))
    ids = list(range(25))
    ours = cluster_corpus_test([{"ids": ids, "hyp": worse, "ref": refs}], [{"ids": ids, "hyp": better, "ref": refs}],
                               metric, method, resamples=300, seed=77)
    theirs = paired_corpus_test(worse, better, refs, metric, method, resamples=300, seed=77)
    assert 0.1 < theirs.p < 0.95  # neither end of the scale, so agreement is informative
    assert (ours.p, ours.diff, ours.ci_low, ours.ci_high, ours.reference_se) == (
        theirs.p, theirs.diff, theirs.ci_low, theirs.ci_high, theirs.reference_se)
    same = cluster_corpus_test([{"ids": ids, "hyp": worse, "ref": refs}] * 2,
                               [{"ids": ids, "hyp": worse, "ref": refs}] * 2, metric, method, resamples=50)
    assert (same.diff, same.p) == (0.0, 1.0)


def test_holm_families_are_task_and_scope():
    def row(setting, scope, p):
        result = paired_bootstrap_accuracy(REF, SYS, 10)
        return SignificanceRow("t", setting, "full", scope, "test_accuracy", type(result)(**{**result.__dict__, "p": p}))

    rows = with_holm([row("a", "pooled", 0.01), row("b", "pooled", 0.04), row("a", "seed 0", 0.03),
                      row("b", "seed 0", 0.03), SignificanceRow("t", "c", "full", "pooled", "test_accuracy", None)])
    assert [r.p_holm for r in rows] == pytest.approx([0.02, 0.04, 0.06, 0.06, None])
    assert [r.significant for r in rows] == [True, True, False, False, False]


def test_runs_without_outputs_are_rows_with_a_note_and_bad_pairs_name_the_runs():
    ref, sys = clearly_better(20)
    old = run("tree", 1, sys)
    del old["predictions"]
    settings = {"full": [run("full", 0, ref), run("full", 1, ref)], "tree": [run("tree", 0, sys), old]}
    rows = compare_task("t", settings, "full", resamples=100)
    assert [(r.scope, r.result is None, r.note) for r in rows] == [
        ("seed 0", False, ""), ("seed 1", True, "no per-item outputs"), ("pooled", False, "")]
    assert rows[2].result.n_items == 20  # only the paired seed
    settings["tree"] = [run("tree", 0, sys, ids=[f"j{k}" for k in range(20)])]
    with pytest.raises(PairingError, match="runs 'full_s0' and 'tree_s0' cannot be paired: ids differ at item 0"):
        compare_task("t", settings, "full")
    with pytest.raises(ValueError, match="reference setting 'x' is not among"):
        compare_task("t", settings, "x")


def test_paired_detectable_effect_reads_the_comparisons_own_spread():
    from statistics import NormalDist

    from structattn.experiments.significance import PairedResult, paired_detectable_effect

    z = NormalDist()
    half = z.inv_cdf(0.975)  # a 95% interval of +-1.96 means a standard error of 1
    result = PairedResult(diff=0.0, ci_low=-half, ci_high=half, p=1.0, n_items=10, method="paired_bootstrap",
                          reference_score=0.5, reference_se=0.1)
    assert paired_detectable_effect(result) == pytest.approx(z.inv_cdf(0.975) + z.inv_cdf(0.8))  # 2.80


# ---------------------------------------------------------------- interaction: a gain in one task minus in another


def _noisy_runs(refs, rates, seed):
    """One run per rate: each word of the reference replaced by "zz" with that probability (``ids`` s0, s1, ...)."""
    rng = random.Random(seed)
    ids = [f"s{k}" for k in range(len(refs))]
    return [{"ids": ids, "hyp": [" ".join(w if rng.random() > rate else "zz" for w in r.split()) for r in refs],
             "ref": refs} for rate in rates]


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_interaction_is_the_difference_of_the_two_pooled_gains_on_shared_item_resamples(metric):
    """Plain loops with sacrebleu's corpus scores: per resample of the items, the four systems' concatenated
    outputs scored, and the gain of task a minus the gain of task b."""
    import sacrebleu

    from structattn.experiments.significance import cluster_interaction_test

    refs, _, _ = translations(12, seed=6)
    ref_a, sys_a = _noisy_runs(refs, (0.6, 0.6), 1), _noisy_runs(refs, (0.2, 0.2), 2)  # a large gain (two seeds)
    ref_b, sys_b = _noisy_runs(refs, (0.4, 0.4), 3), _noisy_runs(refs, (0.3, 0.3), 4)  # a small one
    corpus = sacrebleu.corpus_bleu if metric == "bleu" else sacrebleu.corpus_chrf
    kwargs = {"force": True} if metric == "bleu" else {}

    def score(runs, idx):
        return corpus([r["hyp"][i] for i in idx for r in runs], [[r["ref"][i] for i in idx for r in runs]],
                      **kwargs).score

    def delta(idx):
        return (score(sys_a, idx) - score(ref_a, idx)) - (score(sys_b, idx) - score(ref_b, idx))

    diffs = np.array([delta(idx) for idx in np.random.default_rng(99).choice(12, size=(40, 12), replace=True)])
    ours = cluster_interaction_test(ref_a, sys_a, ref_b, sys_b, metric, resamples=40, seed=99)
    observed = delta(range(12))
    assert ours.diff == pytest.approx(observed) and observed > 0
    assert (ours.ci_low, ours.ci_high) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), abs=1e-3)
    magnitude = np.abs(diffs)
    assert ours.p == (1 + np.count_nonzero(magnitude - magnitude.mean() > abs(observed) + 1e-9)) / 41
    assert ours.reference_score == pytest.approx(score(sys_b, range(12)) - score(ref_b, range(12)))
    assert ours.n_items == 12 and ours.method == "cluster_interaction_bs"


def test_interaction_of_equal_gains_is_zero_and_swapping_the_tasks_negates_it():
    from structattn.experiments.significance import cluster_interaction_test

    refs, _, _ = translations(30, seed=2)
    ref_a, sys_a = _noisy_runs(refs, (0.5,), 1), _noisy_runs(refs, (0.2,), 2)
    ref_b, sys_b = _noisy_runs(refs, (0.5,), 3), _noisy_runs(refs, (0.4,), 4)
    same = cluster_interaction_test(ref_a, sys_a, ref_a, sys_a, resamples=200)
    assert same.diff == 0 and same.p == 1.0 and same.ci_low == same.ci_high == 0
    ab = cluster_interaction_test(ref_a, sys_a, ref_b, sys_b, resamples=200)
    ba = cluster_interaction_test(ref_b, sys_b, ref_a, sys_a, resamples=200)
    assert ba.diff == pytest.approx(-ab.diff) and ba.p == ab.p
    assert (ba.ci_low, ba.ci_high) == pytest.approx((-ab.ci_high, -ab.ci_low))


def test_interaction_a_clearly_larger_gain_is_significant():
    from structattn.experiments.significance import cluster_interaction_test

    refs, _, _ = translations(300, seed=4)
    big = cluster_interaction_test(_noisy_runs(refs, (0.7, 0.7), 1), _noisy_runs(refs, (0.1, 0.1), 2),
                                   _noisy_runs(refs, (0.4, 0.4), 3), _noisy_runs(refs, (0.35, 0.35), 4))
    assert big.diff > 10 and big.p < 0.01 and big.ci_low > 0


def test_interaction_refuses_unpaired_groups_by_name():
    from structattn.experiments.significance import cluster_interaction_test

    refs, _, _ = translations(10, seed=1)
    run = _noisy_runs(refs, (0.3,), 1)
    with pytest.raises(PairingError, match="the system of task b has no runs"):
        cluster_interaction_test(run, run, run, [])
    with pytest.raises(PairingError, match="task a: 2 reference runs and 1 system runs"):
        cluster_interaction_test(run * 2, run, run, run)
    other = [{**run[0], "ref": [*refs[:-1], "another reference"]}]
    with pytest.raises(PairingError, match="the reference of task b, run 0: ref differ .* at item 9; the interaction "
                                           "needs one test set for both tasks"):
        cluster_interaction_test(run, run, other, other)


# ---------------------------------------------------------------- the two-sided bootstrap p of BLEU / chrF


def _two_sided_oracle(diffs):
    """``2 (1 + the smaller tail) / (B + 1)``, capped at 1, written out from the definition."""
    low, high = int(np.sum(diffs <= 0)), int(np.sum(diffs >= 0))
    return min(1.0, 2 * (1 + min(low, high)) / (diffs.size + 1))


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_two_sided_corpus_p_reads_the_same_resamples_as_the_interval(metric):
    """method="bootstrap_two_sided": the same resamples, difference and interval as sacrebleu's test, with p the
    two-sided share of resampled differences on the other side of 0 (pooled, per seed and interaction alike)."""
    refs, worse, better = translations(12, seed=6)
    ids = [f"s{k}" for k in range(12)]
    ref_runs, sys_runs = [{"ids": ids, "hyp": worse, "ref": refs}], [{"ids": ids, "hyp": better, "ref": refs}]
    diffs = cluster_oracle(ref_runs, sys_runs, metric, 40, seed=99)
    moses = cluster_corpus_test(ref_runs, sys_runs, metric, resamples=40, seed=99)
    ours = cluster_corpus_test(ref_runs, sys_runs, metric, "bootstrap_two_sided", resamples=40, seed=99)
    assert (ours.diff, ours.ci_low, ours.ci_high) == (moses.diff, moses.ci_low, moses.ci_high)
    assert ours.p == pytest.approx(_two_sided_oracle(diffs)) and ours.method == "cluster_paired_bs_two_sided"
    single = paired_corpus_test(worse, better, refs, metric, "bootstrap_two_sided", resamples=40, seed=99)
    assert (single.p, single.ci_low, single.ci_high) == (ours.p, ours.ci_low, ours.ci_high)
    assert single.method == "sacrebleu_paired_bs_two_sided"


def test_sacrebleus_p_is_about_the_one_sided_p_of_a_clear_difference():
    """The reason the two-sided p exists: for a difference a few standard errors from 0, sacrebleu's Moses
    statistic counts about one tail of the resampled differences, so its p is well below the two-sided p (about
    half when they are normal)."""
    from structattn.experiments.significance import cluster_interaction_test

    refs, _, _ = translations(300, seed=4)
    runs = [_noisy_runs(refs, (rate,), k) for k, rate in enumerate((0.40, 0.39, 0.40, 0.40))]
    moses = cluster_corpus_test(runs[0], runs[1], resamples=2000, seed=3)
    two = cluster_corpus_test(runs[0], runs[1], "bleu", "bootstrap_two_sided", resamples=2000, seed=3)
    assert 0.005 < two.p < 0.2 and two.ci_low > 0, "the test needs a difference between clear and invisible"
    assert moses.p < 0.75 * two.p
    both = [cluster_interaction_test(*runs, resamples=2000, seed=3, method=m)
            for m in ("bootstrap", "bootstrap_two_sided")]
    assert both[0].diff == both[1].diff and both[0].p < 0.75 * both[1].p


def test_methods_that_sacrebleu_or_the_interaction_lack_are_refused():
    from structattn.experiments.significance import cluster_interaction_test, sacrebleu_paired_test

    refs, worse, better = translations(10, seed=1)
    with pytest.raises(ValueError, match="sacrebleu has no significance method 'bootstrap_two_sided'"):
        sacrebleu_paired_test(worse, better, refs, "bleu", "bootstrap_two_sided")
    run = _noisy_runs(refs, (0.3,), 1)
    with pytest.raises(ValueError, match="the interaction test has no method 'ar'"):
        cluster_interaction_test(run, run, run, run, method="ar")
    with pytest.raises(ValueError, match="unknown significance method 'exact'"):
        paired_corpus_test(worse, better, refs, "bleu", "exact")
