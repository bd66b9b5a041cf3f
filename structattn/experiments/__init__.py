"""Experiments: single runs, declarative comparisons (sharded and merged), results tables and plots."""

from structattn.experiments.compare import Comparison, report, run_comparison, train_one
from structattn.experiments.results import csv_text, markdown_text, write_tables
from structattn.experiments.run import (
    PreparedData,
    RunSpec,
    Setup,
    build_model,
    evaluate_checkpoint,
    execute,
    make_providers,
    make_task,
    prepare_data,
)
from structattn.experiments.shards import merge, parse_shard

__all__ = [
    "Comparison",
    "PreparedData",
    "RunSpec",
    "Setup",
    "build_model",
    "csv_text",
    "evaluate_checkpoint",
    "execute",
    "make_providers",
    "make_task",
    "markdown_text",
    "merge",
    "parse_shard",
    "prepare_data",
    "report",
    "run_comparison",
    "train_one",
    "write_tables",
]
