"""Experiments: single runs, declarative comparisons (sharded and merged), results tables and plots.

The names are imported on first use, so that a command's argument parser in this package (``structattn
probe --help``, ``structattn translate --help``) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from structattn._lazy import lazy_names

_NAMES = {
    "Comparison": "compare", "report": "compare", "run_comparison": "compare", "train_one": "compare",
    "csv_text": "results", "markdown_text": "results", "write_tables": "results",
    "PreparedData": "run", "RunSpec": "spec", "Setup": "spec", "build_model": "run", "evaluate_checkpoint": "run",
    "execute": "run", "make_providers": "spec", "make_task": "spec", "prepare_data": "run",
    "RUNNERS": "runners", "Runner": "runners", "register_runner": "runners", "runner_for": "runners",
    "merge": "shards", "parse_shard": "shards",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES)

if TYPE_CHECKING:  # static checkers see the eager imports
    from structattn.experiments.compare import Comparison, report, run_comparison, train_one
    from structattn.experiments.results import csv_text, markdown_text, write_tables
    from structattn.experiments.run import PreparedData, build_model, evaluate_checkpoint, execute, prepare_data
    from structattn.experiments.runners import RUNNERS, Runner, register_runner, runner_for
    from structattn.experiments.spec import RunSpec, Setup, make_providers, make_task
    from structattn.experiments.shards import merge, parse_shard
