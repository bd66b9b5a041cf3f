"""``structattn probe CHECKPOINT.pt``: the probes of :mod:`structattn.experiments.probe_command` on a model
trained by ``structattn train`` / ``compare``.

The model is rebuilt from the checkpoint's ``meta`` as ``structattn eval`` does (the recorded plugins are
replayed first, so a plugin's variant or provider needs no ``--import``), the treebank is encoded with the
checkpoint's vocabulary and structure providers by training's own code (``encode_inputs``), and the encoder
runs with ``return_weights=True``. Layers are numbered as on the HF path:

* states: layer 0 is the embedding output (token embeddings plus positions), layer l the output of encoder
  layer l; the last layer's state is the encoder's output (after its final LayerNorm), as an HF model's last
  hidden state is. Each word is read at its first token (``TaskModel.encode_words``).
* attention: layer l (1-based) is the attention inside encoder layer l, all heads of all its groups in plan
  order. Subword vocabularies (``subword_chars``) are pooled to words as on the HF path (a word's pieces
  summed as keys, averaged as queries); for word-level vocabularies the pooling is the identity.

The random control is a freshly initialised model of the same task, plan, sizes and vocabulary (seeded).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from structattn.encoders import TaskModel, Vocab
from structattn.experiments.probe_command import PROBES, check_probes, probe_encoded, split
from structattn.experiments.run import rebuild_meta
from structattn.experiments.runners import runner_for
from structattn.experiments.spec import make_task
from structattn.probes.stacking import chunks, pad_cat
from structattn.hf.pooling import first_piece_states, piece_matrix, word_attention
from structattn.progress import progress_bar
from structattn.structures.providers.base import StructureProvider
from structattn.structures.sentence import Sentence
from structattn.tasks.base import IGNORE
from structattn.training import Example, load_checkpoint, make_batch


def probe_checkpoint(
    checkpoint: str | Path | dict[str, Any],
    sentences: Sequence[Sentence],
    probes: Sequence[str] = PROBES,
    layers: Sequence[int] | None = None,
    name: str | None = None,
    control: bool = True,
    test_fraction: float = 0.25,
    epochs: int = 30,
    seed: int = 0,
    batch_size: int = 16,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Probe the model of a structattn checkpoint (a path or the dict of ``load_checkpoint``) on ``sentences``;
    rows with the columns of ``probe.csv``, then those of the random control (``control``) named
    ``"random control"``. ``name`` defaults to the checkpoint's run id. Other arguments as
    :func:`~structattn.experiments.probe_command.probe_model`.

    Raises:
        ValueError: the checkpoint cannot be rebuilt (see :func:`rebuild`), a structure of the checkpoint
            needs an annotation the treebank lacks (naming the structure), an unknown probe, too few sentences.
    """
    check_probes(probes)
    data = checkpoint if isinstance(checkpoint, dict) else load_checkpoint(checkpoint)
    make, vocab, providers = rebuild(data)
    model = make()
    model.load_state_dict(data["model"])
    models = [(name or str(data["meta"].get("run_id") or "checkpoint"), model)]
    if control:
        torch.manual_seed(seed)
        models.append(("random control", make()))
    train, test = split(sentences, test_fraction, seed)
    examples = encode_sentences(train + test, vocab, providers, progress)
    rows: list[dict[str, Any]] = []
    for label, m in models:
        states, attentions = encode(m, examples, batch_size, progress)
        rows += probe_encoded(states, attentions, train, test, probes, layers, label, epochs, seed, progress)
    return rows


def rebuild(data: Mapping[str, Any]) -> tuple[Callable[[], TaskModel], Vocab, dict[str, StructureProvider]]:
    """A builder of the checkpoint's (untrained) model, its vocabulary and structure providers, from ``meta``,
    after replaying the plugins the run recorded.

    Raises:
        ValueError: ``meta`` lacks what a rebuild needs, a plugin cannot be imported, or the checkpoint is of a
            translation task or a fine-tuned HF setting (probe the HF model directory instead).
    """
    meta = rebuild_meta(data)
    task = make_task(meta["task"])
    return runner_for(task, meta["plan"]).rebuild_encoder(meta, task)


def encode_sentences(sentences: Sequence[Sentence], vocab: Vocab, providers: Mapping[str, StructureProvider],
                     progress: bool = True) -> list[Example]:
    """Token ids and the checkpoint's structures of ``sentences`` (their words, as training encodes them).

    Raises:
        ValueError: a sentence lacks an annotation a structure's provider requires, naming the structure.
    """
    from structattn.training.data import encode_inputs

    for structure, provider in providers.items():
        for sentence in sentences:
            try:
                provider.check(sentence)
            except ValueError as err:
                raise ValueError(f"the checkpoint's structure {structure!r} cannot be built on this treebank: "
                                 f"{err}") from None
    # length-sorted chunks of 16: graph distances of a chain provider on 30 treebank sentences take 0.4 s so,
    # 2.6 s in training's one chunk of 128 (padded to the longest sentence)
    inputs = encode_inputs(sentences, [s.words for s in sentences], vocab, providers, chunk=16, quiet=not progress,
                           desc="structures")
    # no labels: the probes read states and attention only
    return [Example(ids, wids, [IGNORE] * len(s), st, s.id) for (ids, wids, st), s in zip(inputs, sentences)]


@torch.no_grad()
def encode(model: TaskModel, examples: Sequence[Example], batch_size: int = 16,
           progress: bool = True) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Word-level states per layer (embeddings first) and word-level attention per layer, end-padded.

    Shapes:
        returns states[l] (s, w, d) and attentions[l] (s, h, w, w), s examples, w their most words.
    """
    model.eval()
    states: list[list[torch.Tensor]] = []
    attentions: list[list[torch.Tensor]] = []
    for chunk in progress_bar(list(chunks(examples, batch_size)), quiet=not progress, desc="encode", leave=False):
        batch = make_batch(chunk, "token")
        with _layer_states(model) as hidden:
            out = model.encoder(batch.input_ids, batch.token_mask, batch.structures, return_weights=True)
        hidden[-1] = out.hidden  # after the final norm, as an HF model's last hidden state
        word_ids = [list(range(len(e))) if e.word_ids is None else e.word_ids for e in chunk]
        pieces = piece_matrix(word_ids, batch.input_ids.shape[1])  # (b, w, n); identity for word-level input
        states.append([first_piece_states(h, pieces) for h in hidden])
        attentions.append([word_attention(_weights(a, k), pieces) for k, a in enumerate(out.attentions)])
    return [pad_cat([s[l] for s in states]) for l in range(len(states[0]))], \
        [pad_cat([a[l] for a in attentions]) for l in range(len(attentions[0]))]


@contextlib.contextmanager
def _layer_states(model: TaskModel) -> Iterator[list[torch.Tensor]]:
    """Collect the input of the first encoder layer (the embedding output) and every layer's output."""
    hidden: list[torch.Tensor] = []
    layers = model.encoder.layers
    hooks = [layers[0].register_forward_pre_hook(lambda module, args: hidden.append(args[0]))]
    hooks += [layer.register_forward_hook(lambda module, args, out: hidden.append(out[0])) for layer in layers]
    try:
        yield hidden
    finally:
        for hook in hooks:
            hook.remove()


def _weights(weights: torch.Tensor | None, layer: int) -> torch.Tensor:
    if weights is None:
        raise ValueError(f"encoder layer {layer + 1} returned no attention weights with return_weights=True")
    return weights.float()
