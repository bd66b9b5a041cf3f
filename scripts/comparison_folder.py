"""The finished comparison behind a table script: ``FOLDER`` itself, its merged shards, or a run of the config
into it. Shared by ``minilm_finetune.py`` and ``pretrained_encoder_tables.py`` (imported beside them)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path


def run(command: list[str]) -> None:
    """Print ``command`` and run it; a failure raises ``CalledProcessError``."""
    print("$", shlex.join(command), flush=True)
    subprocess.run(command, check=True)


def results_folder(folder: Path, config: Path, threads: int | None = None) -> Path:
    """The folder whose ``runs/*.json`` are the comparison's records: ``FOLDER`` or, for shards, ``merged``
    (``structattn merge``d first when it is missing); a folder holding neither gets ``structattn compare
    CONFIG`` (``--resume`` when it exists: an interrupted run goes on), with ``--threads`` when given."""
    if (folder / "results.md").is_file():
        return folder
    if sorted(folder.glob("shard-*-of-*")):
        if not (folder / "merged" / "results.md").is_file():
            run(["structattn", "merge", str(folder)])
        return folder / "merged"
    run(["structattn", "compare", str(config), "--out", str(folder)]
        + (["--threads", str(threads)] if threads is not None else [])
        + (["--resume"] if folder.exists() else []))
    return folder
