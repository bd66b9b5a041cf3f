"""Probe steps: analyses a comparison runs on every trained model after its test evaluation, adding metrics
to the run's record (hence to ``results.csv`` / ``results.md``).

Declared by spec, like tasks (``compare.probes = ['structural_distance', 'tree_induction(max_items=100)']``):

=======================  =====================================================================================
step                     metrics
=======================  =====================================================================================
``structural_distance``  distance probe (Hewitt & Manning 2019) fit on frozen train hidden states, scored on
                         test: ``dist_uuas``, ``dist_spearman``
``structural_depth``     depth probe, likewise: ``depth_root_acc``, ``depth_spearman``
``tree_induction``       trees induced from each head's test attention (``scoring=``, punctuation excluded):
                         ``tree_uuas_L{l}H{h}``, ``tree_uuas_best``, ``tree_uuas_random``,
                         ``tree_uuas_right_branching``
``by_attractors``        sentence tasks whose items carry ``meta["num_attractors"]`` (``agreement``): test
                         accuracy per count, ``acc_attractors_{k}``
``reorder_positions``    ``ssan_word_reordering`` scored over every word (Yang et al. 2019): ``pos_inserted_acc``,
                         ``pos_origin_acc``, ``pos_both_acc``, and the most-frequent-position baselines
                         ``pos_inserted_majority``, ``pos_origin_majority`` (other tasks: no metrics)
``step_cost``            training-step cost on a train batch: ``step_ms`` (forward + backward, median) and
                         ``step_peak_mib`` (peak memory of one step: CUDA's allocator statistics, or on CPU
                         the running sum of torch.profiler's per-operator allocations)
=======================  =====================================================================================

Steps read word-level items with gold ``heads`` (Sentences); other input fails with a ``ValueError`` naming
the step and the item.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.utils.rnn import pad_sequence

from structattn.encoders.batch import Batch
from structattn.calls import parse_call
from structattn.encoders.model import TaskModel
from structattn.probes import structural, tree_induction
from structattn.registry import Registry
from structattn.structures.sentence import Sentence
from structattn.training.data import Example, make_batch
from structattn.training.evaluation import task_loss

if TYPE_CHECKING:
    from structattn.experiments.runners.encoder import PreparedData

PROBE_STEPS: Registry[ProbeStep] = Registry("probe step")


class ProbeStep:
    """One analysis of a trained model; options are keyword arguments of the constructor."""

    name: str

    def run(self, model: TaskModel, data: PreparedData, examples: dict[str, list[Example]], seed: int,
            device: torch.device | str) -> dict[str, float]:
        raise NotImplementedError


def make_probe_step(spec: str) -> ProbeStep:
    """The step named by ``spec`` (``"tree_induction"`` or ``"structural_depth(epochs=10)"``)."""
    call = parse_call(spec, "probe step")
    if call.args:
        raise ValueError(f"probe step {spec!r}: options must be keywords")
    cls = PROBE_STEPS.get(call.name)
    try:
        return cls(**call.options)
    except TypeError as err:
        raise ValueError(f"probe step {spec!r}: bad options: {err}") from None


def run_probe_steps(specs: Sequence[str], model: TaskModel, data: PreparedData, examples: dict[str, list[Example]],
                    seed: int, device: torch.device | str = "cpu") -> dict[str, float]:
    """Every step's metrics, merged (the model is put in eval mode)."""
    metrics: dict[str, float] = {}
    for spec in specs:
        model.eval()
        metrics.update(make_probe_step(spec).run(model, data, examples, seed, device))
    return metrics


def gold_sentences(data: PreparedData, split: str, step: str, limit: int | None) -> list[Sentence]:
    """The first ``limit`` items of ``split``, checked to be Sentences with a gold tree."""
    items = data.items[split][:limit]
    for item in items:
        if not isinstance(item, Sentence) or item.heads is None:
            raise ValueError(f"probe step {step!r}: item {item.id!r} of split {split!r} is not a Sentence with "
                             "gold heads; the step needs word-level sentences with a dependency tree")
    return items  # type: ignore[return-value]


def batches(examples: Sequence[Example], output: str, device: torch.device | str,
            size: int = 64) -> Iterator[tuple[int, Batch]]:
    """``(index of the first example, batch on device)`` over ``examples`` in order, ``size`` at a time."""
    for start in range(0, len(examples), size):
        yield start, make_batch(examples[start:start + size], output).to(device)


@torch.no_grad()
def word_outputs(model: TaskModel, examples: Sequence[Example], output: str, device: torch.device | str,
                 batch_size: int = 64, attention: bool = False) -> tuple[list[torch.Tensor], list[list[torch.Tensor]]]:
    """Per example, word-level hidden states ``(w, d)`` and (``attention=True``, word-level input only)
    per layer the attention ``(h, n, n)`` over its real tokens."""
    hidden, weights = [], []
    for start, batch in batches(examples, output, device, batch_size):
        if attention and batch.word_ids is not None:
            raise ValueError("probe step 'tree_induction' needs word-level input (no subword vocabulary)")
        words, word_mask, out = model.encode_words(batch, return_weights=attention)  # words (b, w, d)
        for k in range(batch.input_ids.shape[0]):
            w, n = int(word_mask[k].sum()), len(examples[start + k])
            hidden.append(words[k, :w].float().cpu())
            if attention:
                weights.append([a[k, :, :n, :n].float().cpu() for a in out.attentions])
    return hidden, weights


def padded(hidden: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(N, n, d)`` states padded at the end and the ``(N, n)`` token mask."""
    lengths = torch.tensor([len(h) for h in hidden])
    states = pad_sequence(hidden, batch_first=True)
    return states, torch.arange(states.shape[1])[None, :] < lengths[:, None]


class _Structural(ProbeStep):
    """Fit a structural probe on frozen train states (first ``max_train`` items), score it on test;
    ``gold_edges`` picks the gold UUAS edges (``"reference"``: as the paper's code; ``"tree"``; see
    :mod:`structattn.probes.structural`)."""

    probe_class: type[structural.StructuralProbe]
    prefix: str
    keys: tuple[str, ...]

    def __init__(self, epochs: int = 20, lr: float = 1e-3, rank: int | None = None, max_train: int = 1000,
                 gold_edges: str = "reference") -> None:
        if gold_edges not in structural.GOLD_EDGES:
            raise ValueError(f"probe step {self.name!r}: gold_edges must be one of {structural.GOLD_EDGES}, got {gold_edges!r}")
        self.epochs, self.lr, self.rank, self.max_train, self.gold_edges = epochs, lr, rank, max_train, gold_edges

    def run(self, model, data, examples, seed, device):
        sets = {}
        for split, limit in (("train", self.max_train), ("test", None)):
            gold = gold_sentences(data, split, self.name, limit)
            states, _ = word_outputs(model, examples[split][:len(gold)], data.task.output, device)
            sets[split] = (*padded(states), gold)
        d = sets["train"][0].shape[-1]
        probe = self.probe_class(d, self.rank or d)
        structural.fit_probe(probe, *sets["train"], epochs=self.epochs, lr=self.lr, seed=seed, progress=False)
        punct = all(s.upos is not None for s in sets["train"][2] + sets["test"][2])
        scores = structural.evaluate(probe, *sets["test"], exclude_punct=punct, gold_edges=self.gold_edges)
        return {f"{self.prefix}_{k}": scores[k] for k in self.keys}


@PROBE_STEPS.register("structural_distance")
class StructuralDistance(_Structural):
    probe_class, prefix, keys = structural.DistanceProbe, "dist", ("uuas", "spearman")


@PROBE_STEPS.register("structural_depth")
class StructuralDepth(_Structural):
    probe_class, prefix, keys = structural.DepthProbe, "depth", ("root_acc", "spearman")


@PROBE_STEPS.register("tree_induction")
class TreeInduction(ProbeStep):
    """UUAS of trees induced from every layer's and head's attention on the first ``max_items`` test items,
    against a random-tree and a right-branching baseline.

    Options: ``scoring`` (``"symmetric"``, ``"marecek_rosa"``, ``"directed_gold_root"``; see
    :mod:`structattn.probes.tree_induction`) and ``exclude_punct`` (default True: punctuation is left out of
    decoding and scoring, as in the structural probes, whenever every test item has ``upos``; items without
    ``upos`` are scored over every word)."""

    def __init__(self, max_items: int = 200, num_random: int = 10, scoring: str = "symmetric",
                 exclude_punct: bool = True) -> None:
        if scoring not in tree_induction.SCORINGS:
            raise ValueError(f"probe step 'tree_induction': unknown scoring {scoring!r}; known: "
                             f"{', '.join(tree_induction.SCORINGS)}")
        self.max_items, self.num_random, self.scoring, self.exclude_punct = max_items, num_random, scoring, exclude_punct

    def run(self, model, data, examples, seed, device):
        gold = gold_sentences(data, "test", self.name, self.max_items)
        _, weights = word_outputs(model, examples["test"][:len(gold)], data.task.output, device, attention=True)
        n = max(len(s) for s in gold)
        layers = [torch.stack([_pad_square(w[layer], n) for w in weights]) for layer in range(len(weights[0]))]
        punct = self.exclude_punct and all(s.upos is not None for s in gold)
        rows = tree_induction.tree_induction_uuas(layers, gold, exclude_punct=punct, num_random=self.num_random,
                                                  seed=seed, scoring=self.scoring)
        out = {f"tree_uuas_L{r['layer']}H{r['head']}": r["uuas"] for r in rows}
        out["tree_uuas_best"] = max(r["uuas"] for r in rows)
        out["tree_uuas_random"] = rows[0]["random_baseline"]
        out["tree_uuas_right_branching"] = rows[0]["right_branching_baseline"]
        return out


def _pad_square(w: torch.Tensor, n: int) -> torch.Tensor:
    extra = n - w.shape[-1]
    return torch.nn.functional.pad(w, (0, extra, 0, extra))


@PROBE_STEPS.register("by_attractors")
class ByAttractors(ProbeStep):
    """Test accuracy of a sentence task per ``meta["num_attractors"]`` of its items."""

    @torch.no_grad()
    def run(self, model, data, examples, seed, device):
        items, test = data.items["test"], examples["test"]
        if data.task.output != "sentence" or any("num_attractors" not in getattr(x, "meta", {}) for x in items):
            raise ValueError(f"probe step 'by_attractors' needs a sentence task whose items carry "
                             f"meta['num_attractors'] (agreement); task {data.task.name!r} does not")
        hits: dict[int, list[bool]] = {}
        for start, batch in batches(test, "sentence", device):
            predicted = model(batch).argmax(-1).cpu()
            for k, ok in enumerate((predicted == batch.labels.cpu()).tolist()):
                hits.setdefault(int(items[start + k].meta["num_attractors"]), []).append(ok)
        return {f"acc_attractors_{c}": sum(v) / len(v) for c, v in sorted(hits.items())}


@PROBE_STEPS.register("reorder_positions")
class ReorderPositions(ProbeStep):
    """Word reordering scored as Yang et al. (2019) do: over *all* words of each test sentence, the word the
    model finds most likely to be the inserted one (tag 1) and the one most likely at the origin (tag 2),
    against the true positions; next to the accuracy of always guessing the train split's most frequent
    position. Runs on ``ssan_word_reordering`` (whatever its scoring); for any other task of a comparison it
    reports nothing and says so on stderr."""

    TASK = "ssan_word_reordering"

    @torch.no_grad()
    def run(self, model, data, examples, seed, device):
        if data.task.name != self.TASK:
            print(f"probe step 'reorder_positions': task {data.task.name!r} is not {self.TASK!r}; no metrics",
                  file=sys.stderr)
            return {}
        items, test = data.items["test"], examples["test"]
        truth = [tuple(x.meta["label"]) for x in items]  # (inserted, origin)
        guesses: list[tuple[int, int]] = []
        for start, batch in batches(test, "token", device):
            logp = model(batch).float().log_softmax(-1).cpu()  # (b, w, 3)
            for k in range(logp.shape[0]):
                n = len(items[start + k])
                guesses.append((int(logp[k, :n, 1].argmax()), int(logp[k, :n, 2].argmax())))
        train = [tuple(x.meta["label"]) for x in data.items["train"]]
        common = [statistics.mode(position[j] for position in train) for j in (0, 1)]

        def share(hit: Callable[[tuple[int, int], tuple[int, int]], bool], guess: list) -> float:
            return sum(hit(g, t) for g, t in zip(guess, truth)) / len(truth)

        fixed = [tuple(common)] * len(truth)
        return {
            "pos_inserted_acc": share(lambda g, t: g[0] == t[0], guesses),
            "pos_origin_acc": share(lambda g, t: g[1] == t[1], guesses),
            "pos_both_acc": share(lambda g, t: g == t, guesses),
            "pos_inserted_majority": share(lambda g, t: g[0] == t[0], fixed),
            "pos_origin_majority": share(lambda g, t: g[1] == t[1], fixed),
        }


@PROBE_STEPS.register("step_cost")
class StepCost(ProbeStep):
    """Median wall time of ``repeats`` forward + backward passes on the first train batch of
    ``batch_size`` items (parameters not updated), and the peak memory of one (see :func:`cpu_peak_mib`)."""

    def __init__(self, batch_size: int = 32, repeats: int = 5) -> None:
        self.batch_size, self.repeats = batch_size, repeats

    def run(self, model, data, examples, seed, device):
        batch = make_batch(examples["train"][:self.batch_size], data.task.output).to(device)
        model.train()
        cuda = torch.device(device).type == "cuda"
        times = []
        for _ in range(self.repeats + 1):
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            task_loss(model(batch), batch.labels).backward()
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        out = {"step_ms": 1000 * statistics.median(times[1:])}
        if cuda:
            out["step_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
        else:
            model.zero_grad(set_to_none=True)
            out["step_peak_mib"] = cpu_peak_mib(lambda: task_loss(model(batch), batch.labels).backward())
        model.zero_grad(set_to_none=True)
        model.eval()
        return out


def cpu_peak_mib(fn: Callable[[], Any]) -> float:
    """Peak of the running sum of CPU allocations minus frees made while ``fn`` runs, at the granularity of
    operators (``torch.profiler`` with ``profile_memory``; events in start order, self memory only)."""
    from torch.profiler import ProfilerActivity, profile

    with _without_native_lines("USDT:"), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    running = peak = 0
    for e in events:
        running += e.self_cpu_memory_usage
        peak = max(peak, running)
    return peak / 2**20


@contextlib.contextmanager
def _without_native_lines(prefix: str) -> Iterator[None]:
    """Drop the lines starting with ``prefix`` that native code writes to file descriptor 2 inside the block
    (torch's profiler announces every start and stop there); every other line is written back to stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode(errors="replace").splitlines(keepends=True)
                    if not line.startswith(prefix)]
            sys.stderr.write("".join(kept))


def check_probe_steps(specs: Sequence[str]) -> tuple[str, ...]:
    """The specs as a tuple, each built once so unknown names or options fail before training."""
    if isinstance(specs, str):
        raise ValueError(f"compare probes must be a list of step specs, got the string {specs!r}")  # noqa: TRY004
    for spec in specs:
        make_probe_step(spec)
    return tuple(specs)


__all__ = ["PROBE_STEPS", "ProbeStep", "check_probe_steps", "make_probe_step", "run_probe_steps"]
