"""Experiments: single runs, declarative comparisons (sharded and merged), results tables and plots."""

from structattn.experiments.compare import Comparison, merge, parse_shard, report, run_comparison
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
    "write_tables",
]
