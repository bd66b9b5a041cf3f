"""Output folders: checked before any training, never silently reused.

A folder that already holds structattn outputs is refused unless the caller asks to ``resume`` (continue
what is there) or to ``overwrite`` (remove those outputs first, saying which). Files that structattn does
not write are never touched.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Sequence

#: what ``structattn train`` writes into its folder
TRAIN_OUTPUTS = ("record.json", "config.gin", "results.csv", "significance.csv", "results.md", "checkpoints",
                 "log.jsonl", "log.csv", "tb")
#: what ``structattn compare`` / ``merge`` write into theirs
COMPARE_OUTPUTS = ("comparison.json", "provenance.json", "config.gin", "results.csv", "significance.csv", "results.md",
                   "runs", "plots")
MODES = ("refuse", "resume", "overwrite")


def used_outputs(out: Path, outputs: Sequence[str]) -> list[str]:
    """The names of ``outputs`` already present in ``out`` (an empty folder is not used)."""
    return [name for name in outputs if (out / name).exists() or (out / name).is_symlink()]


def check_output_folder(out: str | Path, outputs: Sequence[str], mode: str = "refuse",
                        remedy: str = "pass --resume to continue them, --overwrite to replace them") -> list[str]:
    """Fail early when ``out`` cannot take the outputs; return the used names (see the module docstring).

    Args:
        out: the output folder (need not exist).
        outputs: the names the command writes into it.
        mode: ``"refuse"`` a used folder, ``"resume"`` it, or ``"overwrite"`` it (see :func:`clear_outputs`).
        remedy: what the refusal suggests (the flags of the command).

    Raises:
        ValueError: ``out`` is a file, cannot be created or written, or is used and ``mode`` is ``"refuse"``.
    """
    if mode not in MODES:
        raise ValueError(f"output mode must be one of {MODES}, got {mode!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file, not a folder; give a folder (it is created if missing)")
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {str(out)!r} cannot be written: {str(existing)!r} is not a writable folder")
    used = used_outputs(out, outputs) if out.is_dir() else []
    if used and mode == "refuse":
        raise ValueError(f"{str(out)!r} already holds structattn outputs ({', '.join(used)}); {remedy}, or choose "
                         "another --out")
    return used


def clear_outputs(out: str | Path, names: Sequence[str], command: str = "structattn") -> None:
    """Remove ``names`` (files or folders) from ``out``, printing one line that lists them (stderr)."""
    out = Path(out)
    if not names:
        return
    print(f"{command}: --overwrite: removing {', '.join(str(out / n) for n in names)}", file=sys.stderr)
    for name in names:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
