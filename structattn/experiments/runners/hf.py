"""The ``hf`` kind of run: a Hugging Face encoder (``hf(path=... | config=..., plan=...)`` settings, see
:mod:`structattn.experiments.hf_models`) fine-tuned under a task head by the encoder runner's trainer; the
items are re-tokenised with the model's tokenizer."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from structattn.encoders import EncoderConfig
from structattn.experiments import hf_models
from structattn.hf.loading import transformers_quiet
from structattn.experiments.runners.base import Job, register_runner
from structattn.experiments.runners.encoder import EncoderRunner, PreparedData
from structattn.experiments.spec import Setup
from structattn.structures.providers.base import StructureProvider
from structattn.tasks.base import Item, Task


@register_runner("hf")
class HFRunner(EncoderRunner):
    """An attached (or plain) HF encoder and the task's head; data shared with the ``encoder`` kind."""

    setting = "hf"
    rebuild_refusal = "probe takes structattn encoders from checkpoints, and HF models as directories"

    def structures(self, plan: str, model: EncoderConfig) -> set[str]:
        return hf_models.plan_structures(plan)

    def build(self, task: Task, vocab_size: int, plan: str, model: EncoderConfig,
              providers: Mapping[str, StructureProvider]) -> torch.nn.Module:
        return hf_models.build_model(task, vocab_size, plan, providers)

    def encoded_for(self, plan: str, data: PreparedData, providers: Mapping[str, StructureProvider],
                    quiet: bool) -> PreparedData:
        """The items re-tokenised with the setting's tokenizer (structures aligned to its sub-words)."""
        return hf_models.encode_data(plan, data, providers, quiet)

    def check(self, task: Task, plan: str, setup: Setup, providers: Mapping[str, StructureProvider]) -> None:
        with transformers_quiet():  # a build before any run: no "Loading weights" bar per setting
            super().check(task, plan, setup, providers)

    def train(self, job: Job) -> dict[str, Any]:
        with transformers_quiet(job.quiet):
            return super().train(job)

    def evaluate(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                 items: Mapping[str, list[Item]], split: str, quiet: bool = False) -> dict[str, float]:
        with transformers_quiet(quiet):
            return super().evaluate(checkpoint, meta, task, items, split, quiet)

    def predict(self, checkpoint: Mapping[str, Any], meta: Mapping[str, Any], task: Task,
                items: Mapping[str, list[Item]], split: str, quiet: bool = False) -> dict[str, Any]:
        with transformers_quiet(quiet):
            return super().predict(checkpoint, meta, task, items, split, quiet)

    def evaluation_data(self, meta: Mapping[str, Any], task: Task, items: Mapping[str, list[Item]], split: str,
                        providers: Mapping[str, StructureProvider], quiet: bool) -> tuple[Any, list[Any]]:
        """The setting's tokenizer, rebuilt as training built it, and ``split`` encoded with it."""
        return hf_models.evaluation_data(meta["plan"], task, items, split, providers, meta["vocab"].get("tokenizer"),
                                         quiet)
