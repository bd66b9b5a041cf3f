"""Paired significance tests over per-item test outputs: paired bootstrap and approximate randomisation.

Every comparison is paired: system and reference were scored on the same test items, and each resample keeps
item ``i`` of the system with item ``i`` of the reference. The statistic is always the *corpus-level* difference
``delta = M(system) - M(reference)`` recomputed on each resample (accuracy = sum(correct) / sum(total); BLEU and
chrF from summed sufficient statistics), never a mean of per-item scores.

* Accuracy (``paired_bootstrap_accuracy``, ``approximate_randomisation_accuracy``): numpy only, see the
  functions for the equations.
* BLEU / chrF (``paired_corpus_test``): the p-value is sacrebleu's own ``PairedTest`` (``paired_bs`` with
  ``paired_bs_n`` resamples, or ``paired_ar``); the 95% interval of the difference comes from the very resamples
  ``paired_bs`` draws (same generator, same seed, same indices), which ``PairedTest`` does not report.
* Over seeds (``compare_setting``): run ``s`` of a setting is paired with run ``s`` of the reference (same seed).
  *Per seed*, one test each (accuracy in numpy; BLEU/chrF through sacrebleu's ``PairedTest``). *Pooled*, a
  cluster (item-level) test: the unit is the test item, and an item brings the outputs of every paired seed with
  it, because the same sentence appears once per seed and its difficulty is shared across seeds (concatenating
  the seeds' items as if independent would make the pooled p-value optimistic). The cluster bootstrap resamples
  items with replacement and scores, for each system, the concatenation of every seed's outputs of the resampled
  items (accuracy: summed correct / summed total; BLEU/chrF: the corpus score of the summed sacrebleu sufficient
  statistics); approximate randomisation swaps whole items (all seeds at once) between the systems. sacrebleu's
  ``PairedTest`` cannot cluster, so pooled BLEU/chrF rows use ``cluster_corpus_test``, which draws the same
  indices and uses the same p-value definitions as ``PairedTest`` (with one seed it gives its p-value exactly).
* A gain that differs between two tasks on one test set (e.g. 3k vs 29k training pairs):
  ``cluster_interaction_test``, the same item bootstrap on the difference of the two gains.
* Across a table's comparisons: ``holm`` (Holm-Bonferroni step-down).
* ``minimum_detectable_effect``: the smallest difference a test set can detect (normal approximation).

Everything is seeded (``SEED``); the same inputs give the same numbers, bit for bit.

References: Koehn (2004), "Statistical significance tests for machine translation evaluation"; Berg-Kirkpatrick,
Burkett and Klein (2012), "An empirical investigation of statistical significance in NLP"; Riezler and Maxwell
(2005) for approximate randomisation; Holm (1979).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

import numpy as np

#: sacrebleu's default ``SACREBLEU_SEED``; sacrebleu treats seed 0 as "unseeded", so 0 is refused.
SEED = 12345
RESAMPLES = 1000
ALPHA = 0.05
POWER = 0.8
#: "bootstrap": sacrebleu's paired bootstrap (BLEU/chrF: its Moses p-value; accuracy: ``bootstrap_p_value``);
#: "ar": approximate randomisation; "bootstrap_two_sided": the same resamples as "bootstrap", p from
#: ``bootstrap_p_value`` for every metric (BLEU/chrF too), the two-sided test the 95% percentile interval inverts.
#: sacrebleu's Moses statistic ``|delta*| - mean |delta*|`` gives, for a difference of more than about 1.5 standard
#: errors, about the one-sided p (half the two-sided one when the resampled differences are about normal); ``scripts/translation_headline.py`` shows both.
METHODS = ("bootstrap", "ar", "bootstrap_two_sided")
#: the metrics a task's per-item outputs are tested on, by ``record["metric"]`` (names as in results.csv)
TESTED_METRICS = {"accuracy": ("test_accuracy",), "bleu": ("bleu", "chrf")}
_CHUNK = 256  # resamples drawn at once (memory: _CHUNK x items indices)

Counts = tuple[Sequence[int], Sequence[int]]  # (correct per item, total per item)


class PairingError(ValueError):
    """Per-item outputs that cannot be paired or tested (different items, malformed fields)."""


@dataclass(frozen=True)
class PairedResult:
    """One paired comparison of a system against the reference on the same items.

    Attributes:
        diff: observed ``M(system) - M(reference)``.
        ci_low, ci_high: 95% percentile interval of the bootstrap distribution of the difference.
        p: two-sided p-value (the method's definition, see ``method``).
        n_items: paired test items (pooled over seeds: test items, each a cluster of its seeds' outputs).
        method: ``paired_bootstrap``, ``approximate_randomisation``, ``sacrebleu_paired_bs`` or
            ``sacrebleu_paired_ar`` (one run each); pooled over seeds, the same with ``cluster_`` before it
            (``cluster_paired_bootstrap``, ``cluster_approximate_randomisation``, ``cluster_paired_bs``,
            ``cluster_paired_ar``).
        reference_score: ``M(reference)``.
        reference_se: standard error of ``M(reference)`` (for ``minimum_detectable_effect``).
    """

    diff: float
    ci_low: float
    ci_high: float
    p: float
    n_items: int
    method: str
    reference_score: float
    reference_se: float


def _counts(pair: Counts, who: str) -> tuple[np.ndarray, np.ndarray]:
    """``pair`` as two int64 arrays, checked: same length, 0 <= correct <= total."""
    correct, total = np.asarray(pair[0], dtype=np.int64), np.asarray(pair[1], dtype=np.int64)
    if correct.ndim != 1 or correct.shape != total.shape:
        raise PairingError(f"{who}: correct has shape {correct.shape} but total has shape {total.shape}")
    bad = np.flatnonzero((correct < 0) | (correct > total))
    if bad.size:
        k = int(bad[0])
        raise PairingError(f"{who}: item {k} has correct {correct[k]} out of total {total[k]}")
    return correct, total


def _paired_counts(ref: Counts, sys: Counts) -> tuple[np.ndarray, ...]:
    """``(ref_correct, ref_total, sys_correct, sys_total)`` checked to cover the same number of items."""
    rc, rt = _counts(ref, "reference")
    sc, st = _counts(sys, "system")
    if rc.shape != sc.shape:
        raise PairingError(f"reference has {rc.size} items but system has {sc.size}: the test needs the same items")
    if rc.size == 0:
        raise PairingError("no test items to compare")
    return rc, rt, sc, st


def _ratio(correct: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``correct.sum(-1) / total.sum(-1)``, 0 where no target was scored."""
    c, t = correct.sum(-1).astype(np.float64), total.sum(-1).astype(np.float64)
    return np.divide(c, t, out=np.zeros_like(c), where=t > 0)


def _bootstrap_indices(n: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Resampled item indices, ``(k, n)`` per chunk; together the same as sacrebleu's ``paired_bs`` draws,
    ``np.random.default_rng(seed).choice(n, size=(resamples, n))``."""
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, _CHUNK):
        yield rng.integers(0, n, size=(min(_CHUNK, resamples - start), n))


def bootstrap_accuracy_differences(ref: Counts, sys: Counts, resamples: int = RESAMPLES,
                                   seed: int = SEED) -> np.ndarray:
    """The bootstrap distribution of the accuracy difference.

    Resample ``b`` draws ``n`` item indices ``I_b`` with replacement (the same indices for both systems) and
    computes ``delta*_b = sum_{i in I_b} c^sys_i / sum_{i in I_b} t^sys_i - sum_{i in I_b} c^ref_i /
    sum_{i in I_b} t^ref_i``.

    Returns:
        ``delta*``, float64 ``[resamples]``.
    """
    rc, rt, sc, st = _paired_counts(ref, sys)
    parts = [_ratio(sc[idx], st[idx]) - _ratio(rc[idx], rt[idx]) for idx in _bootstrap_indices(rc.size, resamples, seed)]
    return np.concatenate(parts)


def percentile_interval(differences: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The ``level`` percentile interval of bootstrap ``differences`` (numpy's linear interpolation)."""
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(differences, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_p_value(differences: np.ndarray) -> float:
    """Two-sided paired-bootstrap p-value from the share of resampled differences on the other side of 0.

    ``p = min(1, 2 (1 + min(#{b: delta*_b <= 0}, #{b: delta*_b >= 0})) / (B + 1))``.

    This is Koehn's (2004) one-sided test ("the system is better in all but a share p of the resamples") made
    two-sided by doubling the smaller tail, with the usual +1 so that p > 0. It is the inversion of the
    percentile interval: the 95% interval excludes 0 exactly when p is (about) below 0.05. Berg-Kirkpatrick et
    al. (2012) instead count ``delta*_b > 2 delta``; both centre the bootstrap distribution on the observed
    difference; ours needs no shift. Identical systems (every ``delta*_b = 0``) give p = 1.
    """
    b = differences.size
    tail = min(int(np.count_nonzero(differences <= 0)), int(np.count_nonzero(differences >= 0)))
    return min(1.0, 2 * (1 + tail) / (b + 1))


def accuracy_standard_error(correct: Sequence[int], total: Sequence[int]) -> float:
    """Standard error of the accuracy ``p = sum(c) / sum(t)`` over items (ratio estimator, delta method).

    ``SE^2 = sum_i (c_i - p t_i)^2 / ((n - 1) n tbar^2)`` with ``tbar = sum(t) / n``: items (sentences) are the
    sampling unit, so the targets of one sentence are not taken as independent. With one target per item this
    is the binomial ``p (1 - p) / (n - 1)``. When every item is all right or all wrong in the same way (SE 0),
    the binomial SE of ``(sum(c) + 0.5) / (sum(t) + 1)`` over ``sum(t)`` targets is returned instead.
    """
    c, t = _counts((correct, total), "reference")
    n, scored = c.size, int(t.sum())
    if n < 2 or scored == 0:
        return 0.0
    p = c.sum() / scored
    variance = float(((c - p * t) ** 2).sum()) / ((n - 1) * n * (scored / n) ** 2)
    if variance == 0.0:
        smoothed = (c.sum() + 0.5) / (scored + 1)
        variance = smoothed * (1 - smoothed) / scored
    return math.sqrt(variance)


def paired_bootstrap_accuracy(ref: Counts, sys: Counts, resamples: int = RESAMPLES,
                              seed: int = SEED) -> PairedResult:
    """Paired bootstrap test of ``accuracy(sys) - accuracy(ref)`` (Koehn 2004), two-sided.

    Args:
        ref, sys: ``(correct, total)`` per test item, int ``[n]`` each, the same items in the same order.
        resamples: bootstrap resamples ``B``.
        seed: seeds ``np.random.default_rng``.

    Returns:
        ``diff``, the 95% percentile interval of ``delta*`` (see ``bootstrap_accuracy_differences``), ``p`` as
        in ``bootstrap_p_value``.

    Raises:
        PairingError: different numbers of items, or an item with ``correct > total``.
    """
    rc, rt, sc, st = _paired_counts(ref, sys)
    differences = bootstrap_accuracy_differences((rc, rt), (sc, st), resamples, seed)
    diff = float(_ratio(sc, st) - _ratio(rc, rt))
    return PairedResult(diff, *percentile_interval(differences), bootstrap_p_value(differences), int(rc.size),
                        "paired_bootstrap", float(_ratio(rc, rt)), accuracy_standard_error(rc, rt))


def approximate_randomisation_accuracy(ref: Counts, sys: Counts, trials: int = RESAMPLES,
                                       seed: int = SEED) -> PairedResult:
    """Approximate randomisation test of ``accuracy(sys) - accuracy(ref)`` (Riezler and Maxwell 2005).

    Under the null hypothesis the two systems' outputs on an item are exchangeable. Trial ``r`` swaps the pair
    of each item with probability 1/2 (``s_ri = 1``) and computes ``delta_r = acc(A_r) - acc(B_r)``, where
    ``A_r`` takes the reference's item where swapped and the system's elsewhere and ``B_r`` the converse;
    ``p = (1 + #{r: |delta_r| >= |delta|}) / (R + 1)`` (ties count, so identical systems give p = 1). With all
    ``2^n`` swap patterns instead of ``R`` random ones this is the exact permutation test.

    Args:
        ref, sys: ``(correct, total)`` per test item, int ``[n]`` each, the same items in the same order.
        trials: random swap patterns ``R``.
        seed: seeds the swaps, and (separately) the paired bootstrap that gives the 95% interval.

    Returns:
        As ``paired_bootstrap_accuracy`` with the AR p-value.
    """
    rc, rt, sc, st = _paired_counts(ref, sys)
    boot = paired_bootstrap_accuracy((rc, rt), (sc, st), trials, seed)
    rng, hits = np.random.default_rng(seed), 0
    for start in range(0, trials, _CHUNK):
        swap = rng.random((min(_CHUNK, trials - start), rc.size)) < 0.5  # (k, n)
        a = _ratio(np.where(swap, rc, sc), np.where(swap, rt, st))
        b = _ratio(np.where(swap, sc, rc), np.where(swap, st, rt))
        hits += int(np.count_nonzero(np.abs(a - b) >= abs(boot.diff) - 1e-12))
    return PairedResult(boot.diff, boot.ci_low, boot.ci_high, (1 + hits) / (trials + 1), boot.n_items,
                        "approximate_randomisation", boot.reference_score, boot.reference_se)


def paired_accuracy_test(ref: Counts, sys: Counts, method: str = "bootstrap", resamples: int = RESAMPLES,
                         seed: int = SEED) -> PairedResult:
    """``paired_bootstrap_accuracy`` (``method="bootstrap"``) or ``approximate_randomisation_accuracy``
    (``method="ar"``)."""
    if method in ("bootstrap", "bootstrap_two_sided"):
        return paired_bootstrap_accuracy(ref, sys, resamples, seed)
    if method == "ar":
        return approximate_randomisation_accuracy(ref, sys, resamples, seed)
    raise ValueError(f"unknown significance method {method!r}; choose one of {METHODS}")


def corpus_metric(name: str) -> Any:
    """A fresh sacrebleu metric configured as ``structattn.seq2seq.metrics.corpus_scores`` scores runs:
    ``"bleu"``: ``BLEU(force=True)`` (13a tokenizer, exp smoothing); ``"chrf"``: ``CHRF()`` (chrF2)."""
    from sacrebleu.metrics import BLEU, CHRF

    if name == "bleu":
        return BLEU(force=True)
    if name == "chrf":
        return CHRF()
    raise ValueError(f"unknown corpus metric {name!r}; choose 'bleu' or 'chrf'")


def resampled_corpus_scores(hypotheses: Sequence[str], references: Sequence[str], metric: str,
                            resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """The corpus score of each bootstrap resample of the items, recomputed from summed sufficient statistics.

    Same machinery and indices as sacrebleu's ``paired_bs`` (``_extract_corpus_statistics`` as float32, the
    resample's rows summed, ``_compute_score_from_stats``), so the scores are the ones its test compares.

    Returns:
        float64 ``[resamples]``.
    """
    scorer = corpus_metric(metric)
    stats = np.array(scorer._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype="float32")
    return np.array([scorer._compute_score_from_stats(stats[row].sum(0)).score
                     for idx in _bootstrap_indices(len(hypotheses), resamples, seed) for row in idx])


@contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    """``SACREBLEU_SEED`` (sacrebleu's documented way to seed its tests) set to ``seed`` for the block."""
    if seed == 0:
        raise ValueError("seed 0 means 'unseeded' to sacrebleu's PairedTest: pass a positive seed")
    before = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if before is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = before


_METHOD_TAGS = {"bootstrap": "bs", "ar": "ar", "bootstrap_two_sided": "bs_two_sided"}


def sacrebleu_paired_test(ref_hypotheses: Sequence[str], sys_hypotheses: Sequence[str], references: Sequence[str],
                          metric: str, method: str = "bootstrap", resamples: int = RESAMPLES,
                          seed: int = SEED) -> tuple[float, float, float]:
    """sacrebleu's ``PairedTest`` of one system against the reference: ``(reference score, system score, p)``.

    ``method="bootstrap"``: ``test_type="bs"`` (sacrebleu's ``--paired-bs``, Koehn 2004 as in Moses: ``p = (1 +
    #{b: |delta*_b| - mean_b |delta*_b| > |delta|}) / (B + 1)``); ``"ar"``: ``test_type="ar"``
    (``--paired-ar``, ``p = (1 + #{r: |delta_r| > |delta|}) / (R + 1)``). ``resamples`` is ``paired_bs_n`` /
    ``paired_ar_n``.
    """
    from sacrebleu.significance import PairedTest

    if method not in ("bootstrap", "ar"):
        raise ValueError(f"sacrebleu has no significance method {method!r}; choose 'bootstrap' or 'ar'")
    with _sacrebleu_seed(seed):
        test = PairedTest([("reference", list(ref_hypotheses)), ("system", list(sys_hypotheses))],
                          {metric: corpus_metric(metric)}, [list(references)],
                          test_type="bs" if method == "bootstrap" else "ar", n_samples=resamples)
        _, scores = test()
    baseline, system = next(v for k, v in scores.items() if k != "System")
    return float(baseline.score), float(system.score), float(system.p_value)


def paired_corpus_test(ref_hypotheses: Sequence[str], sys_hypotheses: Sequence[str], references: Sequence[str],
                       metric: str = "bleu", method: str = "bootstrap", resamples: int = RESAMPLES,
                       seed: int = SEED) -> PairedResult:
    """Paired test of a corpus metric (BLEU or chrF, 0-100) between two systems' hypotheses of the same items.

    ``p`` from ``sacrebleu_paired_test``; the 95% interval is the percentile interval of ``delta*_b =
    M(sys[I_b]) - M(ref[I_b])`` over the resamples ``I_b`` that sacrebleu's ``paired_bs`` draws with this seed
    (corpus metric recomputed on each resample); ``reference_se`` is the standard deviation of ``M(ref[I_b])``.
    One deviation from sacrebleu: when the two systems score the same on every resample (identical outputs),
    sacrebleu's strict ``>`` reports ``p = 1 / (B + 1)``, "significant"; here ``p = 1``. ``method=
    "bootstrap_two_sided"``: sacrebleu's scores and resamples, ``p = bootstrap_p_value(delta*)``.

    Args:
        ref_hypotheses, sys_hypotheses: detokenised hypotheses, ``[n]`` each, the same items in the same order.
        references: one reference string per item, ``[n]``.

    Raises:
        PairingError: different numbers of hypotheses and references, or no items.
    """
    n = len(references)
    if not n or len(ref_hypotheses) != n or len(sys_hypotheses) != n:
        raise PairingError(f"{len(ref_hypotheses)} reference-system and {len(sys_hypotheses)} system hypotheses "
                           f"for {n} references: the test needs one of each per item")
    if method not in METHODS:
        raise ValueError(f"unknown significance method {method!r}; choose one of {METHODS}")
    two_sided = method == "bootstrap_two_sided"
    ref_score, sys_score, p = sacrebleu_paired_test(ref_hypotheses, sys_hypotheses, references, metric,
                                                    "bootstrap" if two_sided else method, resamples, seed)
    ref_boot = resampled_corpus_scores(ref_hypotheses, references, metric, resamples, seed)
    differences = resampled_corpus_scores(sys_hypotheses, references, metric, resamples, seed) - ref_boot
    if two_sided:
        p = bootstrap_p_value(differences)
    elif sys_score == ref_score and not np.any(differences):
        p = 1.0  # indistinguishable on every resample: sacrebleu's strict ">" would say p = 1 / (B + 1)
    return PairedResult(sys_score - ref_score, *percentile_interval(differences), p, n,
                        f"sacrebleu_paired_{_METHOD_TAGS[method]}", ref_score,
                        float(np.std(ref_boot, ddof=1)) if resamples > 1 else 0.0)


# ---------------------------------------------------------------- pooled over seeds: items as clusters

Outputs = Mapping[str, Sequence[Any]]  # one run's per-item test outputs (``record["predictions"]``)


def item_clusters(outputs: Sequence[Outputs]) -> tuple[list[np.ndarray], int]:
    """Which test item (cluster) each output of each run belongs to, keyed by item id across the runs.

    The ``k``-th occurrence of id ``x`` in one run joins the ``k``-th occurrence of ``x`` in every other run, so a
    test set that lists an id twice keeps two clusters; clusters are numbered in order of first appearance. Runs
    of one comparison normally list the same ids (then every cluster holds one output per run); runs whose test
    sets differ give clusters of different sizes, each item still carrying all the outputs it has.

    Args:
        outputs: per-item outputs of ``S`` runs, each with ``ids``.

    Returns:
        ``(cluster_of, m)``: per run an int64 array ``[n_s]`` of cluster numbers in ``[0, m)``, and ``m``.
    """
    numbers: dict[tuple[Any, int], int] = {}
    cluster_of = []
    for out in outputs:
        seen: dict[Any, int] = {}
        row = []
        for item in out["ids"]:
            occurrence = seen[item] = seen.get(item, -1) + 1
            row.append(numbers.setdefault((item, occurrence), len(numbers)))
        cluster_of.append(np.asarray(row, dtype=np.int64))
    return cluster_of, len(numbers)


def cluster_sums(values: Sequence[np.ndarray], cluster_of: Sequence[np.ndarray], clusters: int) -> np.ndarray:
    """Per-item values ``[n_s, ...]`` of each run summed per cluster: ``[clusters, ...]`` (int64)."""
    out = np.zeros((clusters, *np.shape(values[0])[1:]), dtype=np.int64)
    for v, c in zip(values, cluster_of):
        np.add.at(out, c, np.asarray(v, dtype=np.int64))
    return out


def _paired_clusters(ref_outputs: Sequence[Outputs], sys_outputs: Sequence[Outputs]) -> tuple[list[np.ndarray], int]:
    """The clusters of paired runs (run ``s`` of the system lists the same ids as run ``s`` of the reference)."""
    if not ref_outputs or len(ref_outputs) != len(sys_outputs):
        raise PairingError(f"{len(ref_outputs)} reference runs and {len(sys_outputs)} system runs: pooling needs one "
                           "paired run of each per seed")
    for s, (r, o) in enumerate(zip(ref_outputs, sys_outputs)):
        if list(r["ids"]) != list(o["ids"]):
            raise PairingError(f"paired run {s}: the reference and the system list different item ids")
    return item_clusters(ref_outputs)


def cluster_accuracy_test(ref_outputs: Sequence[Outputs], sys_outputs: Sequence[Outputs], method: str = "bootstrap",
                          resamples: int = RESAMPLES, seed: int = SEED) -> PairedResult:
    """Accuracy pooled over seeds with test items as clusters (see the module docstring).

    Item ``j``'s counts are summed over the paired runs, ``C_j = sum_s c_sj`` and ``T_j = sum_s t_sj``; the cluster
    bootstrap is then ``paired_bootstrap_accuracy`` on ``(C, T)`` (resampled item ``j`` brings every seed's
    outputs: ``delta*_b = sum_{j in I_b} C^sys_j / sum T^sys_j - sum C^ref_j / sum T^ref_j``) and approximate
    randomisation ``approximate_randomisation_accuracy`` on ``(C, T)`` (item ``j`` swapped in every seed at once).
    The observed difference is the accuracy of all seeds' outputs together, and the standard error (for the
    minimum detectable effect) treats items, not item-seed outputs, as the sampling unit.

    Args:
        ref_outputs, sys_outputs: per-item outputs (``ids``, ``correct``, ``total``) of the paired runs, seed ``s``
            of the system at position ``s`` of both lists.

    Returns:
        As ``paired_accuracy_test``; ``n_items`` is the number of test items (clusters), ``method``
        ``cluster_paired_bootstrap`` or ``cluster_approximate_randomisation``.
    """
    cluster_of, m = _paired_clusters(ref_outputs, sys_outputs)
    ref = tuple(cluster_sums([o[f] for o in ref_outputs], cluster_of, m) for f in ("correct", "total"))
    sys = tuple(cluster_sums([o[f] for o in sys_outputs], cluster_of, m) for f in ("correct", "total"))
    result = paired_accuracy_test(ref, sys, method, resamples, seed)
    return replace(result, method=f"cluster_{result.method}")


def corpus_statistics(hypotheses: Sequence[str], references: Sequence[str], metric: str) -> np.ndarray:
    """sacrebleu's per-sentence sufficient statistics of ``metric`` (``_extract_corpus_statistics``), int64
    ``[n, k]``: summed over any set of sentences they give that set's corpus score."""
    scorer = corpus_metric(metric)
    return np.array(scorer._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=np.int64)


def _corpus_p_value(null: np.ndarray, observed: float) -> float:
    """sacrebleu's ``_compute_p_value``: ``(1 + #{null > observed}) / (len(null) + 1)`` (strict ``>``)."""
    return (1 + int(np.count_nonzero(null > observed))) / (null.size + 1)


def _bootstrap_scores(stats: Sequence[np.ndarray], score: Any, m: int, resamples: int, seed: int) -> np.ndarray:
    """Each system's corpus score on each item resample, ``(B, len(stats))``: the items' summed statistics
    (float32, as sacrebleu's ``paired_bs``) of the indices ``_bootstrap_indices`` draws, the same for every system."""
    as32 = [x.astype("float32") for x in stats]
    return np.array([[score(x[row].sum(0)).score for x in as32]
                     for idx in _bootstrap_indices(m, resamples, seed) for row in idx])


def cluster_corpus_test(ref_outputs: Sequence[Outputs], sys_outputs: Sequence[Outputs], metric: str = "bleu",
                        method: str = "bootstrap", resamples: int = RESAMPLES, seed: int = SEED) -> PairedResult:
    """BLEU or chrF pooled over seeds with test items as clusters (see the module docstring).

    Item ``j``'s sufficient statistics are summed over the paired runs, ``X_j = sum_s x_sj`` (``x_sj``: sacrebleu's
    statistics of seed ``s``'s hypothesis of item ``j`` against its reference), so ``M(sum_{j in I} X_j)`` is the
    corpus score of the concatenation of every seed's outputs for the items ``I``. Bootstrap: ``I_b`` drawn as
    sacrebleu's ``paired_bs`` draws (same generator, seed and indices, float32 sums), ``delta*_b =
    M(sys, I_b) - M(ref, I_b)``, and sacrebleu's p-value ``(1 + #{b: |delta*_b| - mean_b |delta*_b| > |delta|})
    / (B + 1)``. Approximate randomisation: sacrebleu's ``paired_ar`` swap draws over items (whole items swapped,
    every seed at once), ``p = (1 + #{r: |delta_r| > |delta|}) / (R + 1)``. The 95% interval is the percentile
    interval of ``delta*``. With a single run this is sacrebleu's ``PairedTest`` p-value, number for number; as in
    ``paired_corpus_test``, systems equal on every resample get ``p = 1``. ``method="bootstrap_two_sided"``: the
    same resamples, ``p = bootstrap_p_value(delta*)`` (the interval excludes 0 about when p < 0.05).

    Args:
        ref_outputs, sys_outputs: per-item outputs (``ids``, ``hyp``, ``ref``) of the paired runs.
        metric: ``"bleu"`` or ``"chrf"``.

    Returns:
        ``n_items``: test items (clusters); ``method``: ``cluster_paired_bs`` or ``cluster_paired_ar``;
        ``reference_se``: the standard deviation of ``M(ref, I_b)``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown significance method {method!r}; choose one of {METHODS}")
    cluster_of, m = _paired_clusters(ref_outputs, sys_outputs)
    for o in (*ref_outputs, *sys_outputs):
        if len(o["hyp"]) != len(o["ids"]) or len(o["ref"]) != len(o["ids"]):
            raise PairingError(f"{len(o['hyp'])} hypotheses and {len(o['ref'])} references for {len(o['ids'])} items")
    stats = [cluster_sums([corpus_statistics(o["hyp"], o["ref"], metric) for o in outs], cluster_of, m)
             for outs in (ref_outputs, sys_outputs)]  # [ref, sys], each int64 (m, k)
    score = corpus_metric(metric)._compute_score_from_stats
    ref_score, sys_score = (float(score(x.sum(0)).score) for x in stats)
    observed = abs(sys_score - ref_score)
    boot = _bootstrap_scores(stats, score, m, resamples, seed)  # (B, 2)
    differences = boot[:, 1] - boot[:, 0]
    if method == "bootstrap":
        magnitude = np.abs(differences)
        p = _corpus_p_value(magnitude - magnitude.mean(), observed)
    elif method == "bootstrap_two_sided":
        p = bootstrap_p_value(differences)
    else:
        swap = np.random.default_rng(seed).integers(2, size=(resamples, m), dtype=bool)  # (R, m), as sacrebleu
        a = swap @ stats[0] + ~swap @ stats[1]  # (R, k): the reference's item where swapped, the system's elsewhere
        b = ~swap @ stats[0] + swap @ stats[1]
        p = _corpus_p_value(np.array([abs(score(x).score - score(y).score) for x, y in zip(a, b)]), observed)
    if sys_score == ref_score and not np.any(differences):
        p = 1.0  # indistinguishable on every resample: the strict ">" would say p = 1 / (B + 1)
    return PairedResult(sys_score - ref_score, *percentile_interval(differences), p, m,
                        f"cluster_paired_{_METHOD_TAGS[method]}", ref_score,
                        float(np.std(boot[:, 0], ddof=1)) if resamples > 1 else 0.0)


def compare_pooled(ref_outputs: Sequence[Outputs], sys_outputs: Sequence[Outputs], kind: str,
                   method: str = "bootstrap", resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, PairedResult]:
    """Every tested metric of a task kind (``TESTED_METRICS``) pooled over paired runs, items as clusters."""
    if kind == "accuracy":
        return {"test_accuracy": cluster_accuracy_test(ref_outputs, sys_outputs, method, resamples, seed)}
    if kind == "bleu":
        return {m: cluster_corpus_test(ref_outputs, sys_outputs, m, method, resamples, seed)
                for m in TESTED_METRICS["bleu"]}
    raise ValueError(f"no significance test for metric {kind!r}; tested: {sorted(TESTED_METRICS)}")


def cluster_interaction_test(ref_a: Sequence[Outputs], sys_a: Sequence[Outputs], ref_b: Sequence[Outputs],
                             sys_b: Sequence[Outputs], metric: str = "bleu", resamples: int = RESAMPLES,
                             seed: int = SEED, method: str = "bootstrap") -> PairedResult:
    """Whether a system's gain over its reference differs between two tasks scored on the same test items.

    The statistic is the difference in differences ``delta = [M(sys_a) - M(ref_a)] - [M(sys_b) - M(ref_b)]``, each
    ``M`` the corpus score of a setting's paired seeds pooled as in ``cluster_corpus_test`` (e.g. task ``a``:
    3k training pairs, task ``b``: 29k, both tested on test_2016: "does the gain grow as data shrinks?"). The
    unit is again the test item: resample ``b`` draws the items ``I_b`` once (``_bootstrap_indices``, as
    ``cluster_corpus_test``) and scores all four systems on them, so an item's difficulty, shared by all four,
    cancels. ``delta*_b`` gives the 95% percentile interval and sacrebleu's two-sided bootstrap p-value, ``(1 +
    #{b: |delta*_b| - mean_b |delta*_b| > |delta|}) / (B + 1)``, the definition every other BLEU row uses;
    ``method="bootstrap_two_sided"``: ``p = bootstrap_p_value(delta*)`` instead.

    Args:
        ref_a, sys_a: per-item outputs (``ids``, ``hyp``, ``ref``) of task ``a``'s paired runs (seed ``s`` of the
            system at position ``s`` of both lists); ``ref_b``, ``sys_b`` the same for task ``b``. Every run
            lists the same items in the same order with the same references.
        metric: ``"bleu"`` or ``"chrf"``.

    Returns:
        ``diff``: ``delta``; ``reference_score``: task ``b``'s gain ``M(sys_b) - M(ref_b)``; ``reference_se``: the
        standard deviation of the resampled gain of task ``b``; ``n_items``: test items; ``method``
        ``cluster_interaction_bs``.

    Raises:
        PairingError: a group without runs, tasks with different numbers of paired runs within one task, or runs
            that list other items or references than the first run of ``ref_a`` (named by group and position).
    """
    if method not in ("bootstrap", "bootstrap_two_sided"):
        raise ValueError(f"the interaction test has no method {method!r}; choose 'bootstrap' or 'bootstrap_two_sided'")
    groups = {"reference of task a": ref_a, "system of task a": sys_a, "reference of task b": ref_b,
              "system of task b": sys_b}
    for name, outs in groups.items():
        if not outs:
            raise PairingError(f"the {name} has no runs: the interaction needs paired runs of all four")
    for task, (ref, sys) in {"a": (ref_a, sys_a), "b": (ref_b, sys_b)}.items():
        if len(ref) != len(sys):
            raise PairingError(f"task {task}: {len(ref)} reference runs and {len(sys)} system runs; pair them by seed")
    first = ref_a[0]
    for name, outs in groups.items():
        for s, o in enumerate(outs):
            if len(o["hyp"]) != len(o["ids"]) or len(o["ref"]) != len(o["ids"]):
                raise PairingError(f"the {name}, run {s}: {len(o['hyp'])} hypotheses and {len(o['ref'])} references "
                                   f"for {len(o['ids'])} items")
            for field in ("ids", "ref"):
                if list(o[field]) != list(first[field]):
                    k = next((k for k, (x, y) in enumerate(zip(o[field], first[field])) if x != y),
                             min(len(o[field]), len(first[field])))
                    raise PairingError(f"the {name}, run {s}: {field} differ from the first reference run's at item "
                                       f"{k}; the interaction needs one test set for both tasks")
    m = len(first["ids"])
    if not m:
        raise PairingError("no test items to compare")
    # per group: the item statistics summed over its seeds, int64 (m, k)
    stats = [np.sum([corpus_statistics(o["hyp"], o["ref"], metric) for o in outs], axis=0) for outs in groups.values()]
    score = corpus_metric(metric)._compute_score_from_stats
    ra, sa, rb, sb = (float(score(x.sum(0)).score) for x in stats)
    observed = (sa - ra) - (sb - rb)
    boot = _bootstrap_scores(stats, score, m, resamples, seed)  # (B, 4)
    gain_b = boot[:, 3] - boot[:, 2]
    differences = (boot[:, 1] - boot[:, 0]) - gain_b
    if method == "bootstrap_two_sided":
        p = bootstrap_p_value(differences)
    else:
        magnitude = np.abs(differences)
        p = _corpus_p_value(magnitude - magnitude.mean(), abs(observed))
    if observed == 0 and not np.any(differences):
        p = 1.0  # the same gain on every resample
    return PairedResult(observed, *percentile_interval(differences), p, m, "cluster_interaction_bs", sb - rb,
                        float(np.std(gain_b, ddof=1)) if resamples > 1 else 0.0)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values (Holm 1979), in the input order.

    With ``p_(1) <= ... <= p_(m)`` sorted, ``p~_(k) = min(1, max_{j <= k} (m - j + 1) p_(j))``: monotone in the
    sorted order and capped at 1. Rejecting where ``p~ < alpha`` controls the family-wise error rate at alpha.

    Raises:
        ValueError: a p-value outside [0, 1] (or NaN), named by position.
    """
    for k, p in enumerate(p_values):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value {k} is {p}, outside [0, 1]")
    m, running = len(p_values), 0.0
    adjusted = [0.0] * m
    for rank, k in enumerate(sorted(range(m), key=lambda k: p_values[k])):
        running = max(running, min(1.0, (m - rank) * p_values[k]))
        adjusted[k] = running
    return adjusted


def minimum_detectable_effect(standard_error: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference a two-sided test at ``alpha`` detects with probability ``power``.

    Normal approximation: ``MDE = (z_{1 - alpha/2} + z_{power}) * sqrt(2) * SE_ref`` (= 2.80 * 1.414 * SE for
    0.05 / 0.8), i.e. the system's score assumed to vary as much as the reference's and independently of it.
    Pairing makes the real difference's variance smaller by the covariance, so this is conservative. ``SE_ref``:
    ``accuracy_standard_error`` for accuracy, the bootstrap standard deviation of the corpus score for BLEU/chrF
    (``PairedResult.reference_se`` holds either).
    """
    z = NormalDist()
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * math.sqrt(2) * standard_error


def paired_detectable_effect(result: PairedResult, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference the paired test detects with probability ``power``, from the spread of this
    comparison's own paired differences: ``(z_{1 - alpha/2} + z_{power}) * SE_diff`` with ``SE_diff`` the bootstrap
    interval's width over ``2 z_{0.975}``. Smaller than :func:`minimum_detectable_effect` when the two systems'
    per-item scores are correlated, as two models of one data set's items are."""
    z = NormalDist()
    se_diff = (result.ci_high - result.ci_low) / (2 * z.inv_cdf(0.975))
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * se_diff


@dataclass(frozen=True)
class SignificanceRow:
    """One comparison of a table: ``setting`` against ``reference`` on ``metric``, for one seed or pooled.

    Attributes:
        scope: ``"seed <s>"`` or ``"pooled"`` (all paired seeds, test items as clusters).
        result: ``None`` when it could not be tested (``note`` says why).
        p_holm: Holm-adjusted p over the rows of the same task and scope that have a result.
    """

    task: str
    setting: str
    reference: str
    scope: str
    metric: str
    result: PairedResult | None
    p_holm: float | None = None
    note: str = ""

    @property
    def significant(self) -> bool:
        """Holm-adjusted p below ``ALPHA``."""
        return self.p_holm is not None and self.p_holm < ALPHA


_FIELDS = {"accuracy": ("correct", "total"), "bleu": ("hyp", "ref")}


def item_outputs(record: dict[str, Any]) -> dict[str, list[Any]] | None:
    """A run record's per-item test outputs (``record["predictions"]``), or ``None`` for records without them.

    Raises:
        PairingError: the outputs lack a field the run's metric needs, or fields of different lengths.
    """
    outputs = record.get("predictions")
    if not outputs:
        return None
    needed = ("ids", *_FIELDS.get(record.get("metric", "accuracy"), ()))
    lengths = {name: len(outputs[name]) for name in needed if name in outputs}
    if len(lengths) < len(needed) or len(set(lengths.values())) > 1:
        raise PairingError(f"run {record.get('run_id')!r}: predictions need {', '.join(needed)} of one length each, "
                           f"got lengths {lengths}")
    return outputs


def _check_same_items(ref_run: dict[str, Any], sys_run: dict[str, Any]) -> None:
    """Paired runs must list the same item ids (and, for translation, the same references) in the same order."""
    ref_out, sys_out = ref_run["predictions"], sys_run["predictions"]
    for name in ("ids", "ref"):
        a, b = ref_out.get(name), sys_out.get(name)
        if a == b:
            continue
        k = next((k for k, (x, y) in enumerate(zip(a or [], b or [])) if x != y), min(len(a or []), len(b or [])))
        raise PairingError(f"runs {ref_run.get('run_id')!r} and {sys_run.get('run_id')!r} cannot be paired: {name} "
                           f"differ at item {k} ({len(a or [])} vs {len(b or [])} items)")


def _by_seed(runs: Sequence[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Runs keyed by seed; two runs of one setting with one seed cannot be paired unambiguously."""
    out: dict[int, dict[str, Any]] = {}
    for run in runs:
        if run["seed"] in out:
            raise PairingError(f"runs {out[run['seed']].get('run_id')!r} and {run.get('run_id')!r} of setting "
                               f"{run['setting']!r} share seed {run['seed']}")
        out[run["seed"]] = run
    return out


def compare_outputs(ref: dict[str, list[Any]], sys: dict[str, list[Any]], kind: str, method: str = "bootstrap",
                 resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, PairedResult]:
    """Every tested metric of a task kind (``TESTED_METRICS``) on paired per-item outputs."""
    if kind == "accuracy":
        result = paired_accuracy_test((ref["correct"], ref["total"]), (sys["correct"], sys["total"]), method,
                                      resamples, seed)
        return {"test_accuracy": result}
    if kind == "bleu":
        return {m: paired_corpus_test(ref["hyp"], sys["hyp"], ref["ref"], m, method, resamples, seed)
                for m in TESTED_METRICS["bleu"]}
    raise ValueError(f"no significance test for metric {kind!r}; tested: {sorted(TESTED_METRICS)}")



def _untested(row: SignificanceRow, kind: str) -> list[SignificanceRow]:
    """``row`` (result ``None``, ``note`` set) once per metric the task kind is tested on."""
    return [replace(row, metric=m) for m in TESTED_METRICS.get(kind, (f"test_{kind}",))]


def _unpaired_note(ref_run: dict[str, Any] | None, sys_run: dict[str, Any], reference: str) -> str:
    """Why run ``sys_run`` cannot be tested against the reference ("" when it can)."""
    kind = sys_run.get("metric", "accuracy")
    if ref_run is None:
        return f"no run of {reference!r} with seed {sys_run['seed']}"
    if kind not in TESTED_METRICS:
        return f"no significance test for metric {kind!r}"
    if item_outputs(ref_run) is None or item_outputs(sys_run) is None:
        return "no per-item outputs"
    return ""


def compare_setting(task: str, setting: str, reference: str, ref_runs: Sequence[dict[str, Any]],
                    sys_runs: Sequence[dict[str, Any]], method: str = "bootstrap", resamples: int = RESAMPLES,
                    seed: int = SEED) -> list[SignificanceRow]:
    """Rows of ``setting`` against ``reference``: per seed (run ``s`` against the reference's run ``s``), then
    pooled over the paired seeds (``compare_pooled``: test items as clusters carrying every seed's outputs, see
    the module docstring); ``p_holm`` not yet set.

    Raises:
        PairingError: paired runs list different items, or one setting has two runs with one seed.
    """
    kind, refs, paired = sys_runs[0].get("metric", "accuracy"), _by_seed(ref_runs), []
    rows: list[SignificanceRow] = []
    for s, sys_run in sorted(_by_seed(sys_runs).items()):
        scope, note = f"seed {s}", _unpaired_note(refs.get(s), sys_run, reference)
        if note:
            rows += _untested(SignificanceRow(task, setting, reference, scope, "", None, note=note), kind)
            continue
        _check_same_items(refs[s], sys_run)
        paired.append((refs[s]["predictions"], sys_run["predictions"]))
        rows += [SignificanceRow(task, setting, reference, scope, m, r)
                 for m, r in compare_outputs(*paired[-1], kind, method, resamples, seed).items()]
    if not paired:
        return rows + _untested(SignificanceRow(task, setting, reference, "pooled", "", None,
                                                note="no per-item outputs"), kind)
    pooled = compare_pooled([r for r, _ in paired], [s for _, s in paired], kind, method, resamples, seed)
    return rows + [SignificanceRow(task, setting, reference, "pooled", m, r) for m, r in pooled.items()]


def with_holm(rows: Sequence[SignificanceRow]) -> list[SignificanceRow]:
    """``rows`` with ``p_holm`` set: Holm over each family of rows that share task and scope (every setting and
    metric of one task's pooled table is one family; each seed's rows another)."""
    families: dict[tuple[str, str], list[int]] = {}
    for k, row in enumerate(rows):
        if row.result is not None:
            families.setdefault((row.task, row.scope), []).append(k)
    out = list(rows)
    for members in families.values():
        for k, adjusted in zip(members, holm([rows[k].result.p for k in members])):  # type: ignore[union-attr]
            out[k] = replace(rows[k], p_holm=adjusted)
    return out


def compare_task(task: str, settings: dict[str, list[dict[str, Any]]], reference: str, method: str = "bootstrap",
                 resamples: int = RESAMPLES, seed: int = SEED) -> list[SignificanceRow]:
    """Every other setting of one task against ``reference`` (per seed and pooled), Holm-adjusted per scope.

    Args:
        settings: run records by setting (in table order), all of task ``task``; must include ``reference``.
    """
    if reference not in settings:
        raise ValueError(f"task {task!r}: reference setting {reference!r} is not among its settings {list(settings)}")
    rows = [row for setting, runs in settings.items() if setting != reference
            for row in compare_setting(task, setting, reference, settings[reference], runs, method, resamples, seed)]
    return with_holm(rows)


def _paired_by_seed(ref_runs: Sequence[dict[str, Any]], sys_runs: Sequence[dict[str, Any]],
                    task: str) -> tuple[list[Outputs], list[Outputs], list[int]]:
    """The per-item outputs of the seeds both settings ran in one task: ``(ref, sys, seeds)``."""
    refs, syss = _by_seed(ref_runs), _by_seed(sys_runs)
    seeds = sorted(set(refs) & set(syss))
    for s in seeds:
        for run in (refs[s], syss[s]):
            if item_outputs(run) is None:
                raise PairingError(f"task {task!r}: run {run.get('run_id')!r} has no per-item outputs")
        _check_same_items(refs[s], syss[s])
    if not seeds:
        raise PairingError(f"task {task!r}: no seed has a run of both settings")
    return [refs[s]["predictions"] for s in seeds], [syss[s]["predictions"] for s in seeds], seeds


def compare_gains(ref_runs_a: Sequence[dict[str, Any]], sys_runs_a: Sequence[dict[str, Any]],
                  ref_runs_b: Sequence[dict[str, Any]], sys_runs_b: Sequence[dict[str, Any]], metric: str = "bleu",
                  resamples: int = RESAMPLES, seed: int = SEED,
                  method: str = "bootstrap") -> tuple[PairedResult, list[int], list[int]]:
    """``cluster_interaction_test`` on run records: a setting's gain over the reference in task ``a`` minus its
    gain in task ``b``, each pooled over the seeds both settings ran in that task.

    Returns:
        ``(result, seeds of a, seeds of b)``.

    Raises:
        PairingError: a task where no seed has a run of both settings, runs without per-item outputs, or paired
            runs (or the two tasks) with different test items.
    """
    task_a = (sys_runs_a or ref_runs_a or [{}])[0].get("task_label", "a")
    task_b = (sys_runs_b or ref_runs_b or [{}])[0].get("task_label", "b")
    ref_a, sys_a, seeds_a = _paired_by_seed(ref_runs_a, sys_runs_a, task_a)
    ref_b, sys_b, seeds_b = _paired_by_seed(ref_runs_b, sys_runs_b, task_b)
    result = cluster_interaction_test(ref_a, sys_a, ref_b, sys_b, metric, resamples, seed, method)
    return result, seeds_a, seeds_b
