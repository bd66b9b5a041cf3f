"""What every kind of run shares: the run's identity (:class:`RunSpec`), the settings of a comparison
(:class:`Setup`) and the spec parsers that turn config strings into tasks and structure providers.

This module sits below the runners (:mod:`structattn.experiments.runners`) and the orchestration
(:mod:`structattn.experiments.run`); both import it, it imports neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, TypeVar

from structattn.calls import parse_call
from structattn.encoders.config import EncoderConfig
from structattn.experiments.results import slug
from structattn.structures.providers.base import StructureProvider, get_provider
from structattn.tasks.base import Task, get_task
from structattn.training.config import TrainConfig

E = TypeVar("E")  #: an encoded example with a ``structures`` field


@dataclass(frozen=True)
class RunSpec:
    """What distinguishes one run of a comparison (labels are for tables; ``task``/``plan`` are the specs)."""

    index: int
    task_label: str
    task: str
    setting: str
    plan: str
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.index:03d}_{slug(self.task_label)}_{slug(self.setting)}_s{self.seed}"


@dataclass(frozen=True)
class Setup:
    """What every run of a comparison shares.

    Args:
        model: encoder sizes.
        training: optimisation settings.
        structures: structure name -> provider spec (``"window(radius=3)"``); a name not listed is a
            provider name with default options (``dependency``).
        vocab: options of :meth:`Vocab.build` (``min_freq``, ``max_size``, ``lowercase``) plus
            ``subword_chars`` (split words into pieces of that many characters; absent: word-level); for
            translation runs also ``subword_model`` (``"bpe"`` / ``"unigram"``) and ``subword_size`` (learned
            subwords trained on the train split, :mod:`structattn.seq2seq.subword`; the encoder kind refuses
            them as bad vocabulary options).
        cache_dir: a structure disk cache (``structattn.structures.cache``) to read and fill, or ``None``.
        probes: probe-step specs run on every trained model (:mod:`structattn.experiments.probe_steps`).
    """

    model: EncoderConfig
    training: TrainConfig
    structures: Mapping[str, str] = field(default_factory=dict)
    vocab: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    probes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What defines the results (the cache folder does not)."""
        out = {"model": self.model.to_dict(), "training": self.training.to_dict(),
               "structures": dict(self.structures), "vocab": dict(self.vocab)}
        return {**out, "probes": list(self.probes)} if self.probes else out


def make_providers(names: Iterable[str], structures: Mapping[str, str]) -> dict[str, StructureProvider]:
    """The provider of every structure name (sorted by name)."""
    providers = {}
    for name in sorted(names):
        call = parse_call(structures.get(name, name), f"structure {name!r}")
        if call.args:
            raise ValueError(f"structure {name!r}: provider options must be keywords, got {structures[name]!r}")
        try:
            providers[name] = get_provider(call.name, **call.options)
        except TypeError as err:
            raise ValueError(f"structure {name!r}: bad options for provider {call.name!r}: {err}") from None
    return providers


def make_task(spec: str) -> Task:
    """The task named by a spec such as ``"depth_tagging(max_depth=5)"``."""
    call = parse_call(spec, "task")
    if call.args:
        raise ValueError(f"task {spec!r}: options must be keywords")
    return get_task(call.name, **call.options)


def plain_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options as JSON gives them back (tuples as lists), so recorded and rebuilt options compare equal."""
    return json.loads(json.dumps(options, sort_keys=True, default=str))


def only_structures(example: E, names: set[str]) -> E:
    """The example (an ``Example`` or a translation pair) with only the structures a run reads (no needless
    collation)."""
    if set(example.structures) == names:  # type: ignore[attr-defined]
        return example
    return replace(example, structures={n: example.structures[n] for n in names})  # type: ignore[attr-defined]


def structure_specs(names: Iterable[str], setup: Setup) -> dict[str, str]:
    """Each structure name a run reads with its provider spec (recorded so that a checkpoint rebuilds them)."""
    return {n: setup.structures.get(n, n) for n in names}
