"""Kinds of run, one file each, chosen by registry (see :mod:`structattn.experiments.runners.base`):

* ``encoder``: our encoder (any attention plan) and a task head, on sentence / token / pair tasks;
* ``hf``: a Hugging Face encoder (``hf(...)`` settings) with our variants attached, and a task head;
* ``seq2seq``: our encoder-decoder on translation tasks;
* ``hf_seq2seq``: a Hugging Face encoder (``hf(...)`` settings, plan attached) under our decoder, on
  translation tasks.
"""

from structattn.experiments.runners.base import RUNNERS, Job, Runner, register_runner, runner_for, setting_kind

__all__ = ["RUNNERS", "Job", "Runner", "register_runner", "runner_for", "setting_kind"]
