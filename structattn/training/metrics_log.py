"""The metrics log of a training run: one row per evaluation, written while the run trains.

A run folder gets ``log.jsonl`` (one JSON object per line, flushed as it is written, so ``tail -f`` follows a
run) and ``log.csv`` (the same rows and columns), plus TensorBoard scalars under ``tb/`` when the
``tensorboard`` package is installed (through :class:`torch.utils.tensorboard.SummaryWriter`; without it the
TensorBoard part is skipped silently, the two files are still written).

Columns, in order: ``step``, ``epoch`` (the pass over the training data the step belongs to, from 0),
``train_loss`` (mean since the previous row), the dev metrics of the trainer (``dev_loss``, ``dev_accuracy``,
``dev_score`` for translation runs), with gradient clipping on ``train_grad_norm_median``,
``train_grad_norm_max`` and ``train_clip_factor_median`` (the gradient norms before clipping since the previous
row, and the median factor clipping shrank a step by; see :meth:`TrainingLoop._gradient_row
<structattn.training.loop.TrainingLoop._gradient_row>`), ``lr``, ``elapsed_s`` (training seconds since the run
began, resumed runs included).

A resumed run appends: opening the log keeps only the rows up to the step the run resumes from (a row written
after the last checkpoint, by a run that then stopped, is dropped and written again), so no step appears twice.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any, Mapping

#: the files and folder a metrics log writes into its folder
LOG_OUTPUTS = ("log.jsonl", "log.csv", "tb")


class MetricsLog:
    """Append-only ``log.jsonl`` / ``log.csv`` (and TensorBoard scalars) in ``folder``.

    Args:
        folder: where the files go (created if missing).
        start_step: the step training starts from; rows of later steps already in the folder are dropped
            (``0``: a fresh run, every earlier row is dropped).
        tensorboard: also write TensorBoard scalars to ``folder/tb`` when the ``tensorboard`` package is
            installed (skipped silently otherwise).
    """

    def __init__(self, folder: str | Path, start_step: int = 0, *, tensorboard: bool = True) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.jsonl, self.csv = self.folder / "log.jsonl", self.folder / "log.csv"
        self.rows = [row for row in read_log(self.jsonl) if row.get("step", 0) <= start_step]
        self.columns: list[str] = list(dict.fromkeys(k for row in self.rows for k in row))
        self.jsonl.write_text("".join(json.dumps(row) + "\n" for row in self.rows), encoding="utf-8")
        self._rewrite_csv()
        self.writer = _summary_writer(self.folder / "tb", start_step) if tensorboard else None

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row (a mapping of column -> number) to every file; each file is flushed."""
        row = dict(row)
        self.rows.append(row)
        with open(self.jsonl, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        if any(k not in self.columns for k in row):  # a new column: the header changes, write the file anew
            self.columns += [k for k in row if k not in self.columns]
            self._rewrite_csv()
        else:
            with open(self.csv, "a", encoding="utf-8", newline="") as handle:
                csv.DictWriter(handle, self.columns, restval="").writerow(row)
        if self.writer is not None:
            for name, value in row.items():
                if name != "step" and isinstance(value, (int, float)):
                    self.writer.add_scalar(scalar_tag(name), value, global_step=row["step"])
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def _rewrite_csv(self) -> None:
        with open(self.csv, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, self.columns, restval="")
            if self.columns:
                writer.writeheader()
            writer.writerows(self.rows)


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``log.jsonl`` (none when the file is missing). A line that is not a JSON object (the
    last line of a run killed while writing it) is skipped with a warning naming the file and the line."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict):
            print(f"structattn: {path}: line {number} is not a JSON object; dropped", file=sys.stderr)
            continue
        rows.append(row)
    return rows


def scalar_tag(column: str) -> str:
    """The TensorBoard tag of a column: ``train_loss`` -> ``train/loss``, ``dev_accuracy`` -> ``dev/accuracy``;
    other columns keep their name."""
    split, _, rest = column.partition("_")
    return f"{split}/{rest}" if split in ("train", "dev") and rest else column


def _summary_writer(folder: Path, start_step: int) -> Any:
    """A TensorBoard writer into ``folder`` (events after ``start_step`` left by a stopped run are purged),
    or ``None`` when the ``tensorboard`` package is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # torch.utils.tensorboard needs the tensorboard package
        return None
    return SummaryWriter(log_dir=str(folder), purge_step=start_step + 1 if start_step else None)
