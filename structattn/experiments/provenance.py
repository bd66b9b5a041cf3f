"""Provenance: what every run record and compare folder says about where its numbers came from.

``environment()`` gives the structattn version, the git commit of the package source (``"unknown"`` outside
a git checkout, ``-dirty`` when the tree has changes), torch and Python versions, torch's thread count, the
CPU model, the hostname and the command line; :func:`data_checksum` a sha256 over a task's items.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import platform
import shlex
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

import structattn
from structattn import plugins

_COMMAND: list[str] | None = None


def set_command_line(argv: Sequence[str]) -> None:
    """The command to record (the CLI sets it; otherwise ``sys.argv``)."""
    global _COMMAND
    _COMMAND = list(argv)


def command_line() -> str:
    return shlex.join(_COMMAND if _COMMAND is not None else sys.argv)


@functools.lru_cache(maxsize=1)
def git_commit(package_dir: str | None = None) -> str:
    """The commit of the git checkout holding the package source, ``-dirty`` when the tree has changes;
    ``"unknown"`` when the package is not a tracked file of a git checkout (an installed wheel) or git fails."""
    folder = Path(package_dir or Path(structattn.__file__).parent)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()

    try:
        git("ls-files", "--error-unmatch", "__init__.py")  # the package itself is tracked here
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain"))
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else ``platform``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def environment() -> dict[str, Any]:
    """Versions, commit, threads, CPU, host, command line and the plugins loaded so far."""
    import torch

    return {"structattn_version": structattn.__version__, "git_commit": git_commit(),
            "torch_version": torch.__version__, "python_version": platform.python_version(),
            "torch_threads": torch.get_num_threads(), "cpu": cpu_model(), "hostname": socket.gethostname(),
            "command": command_line(), "plugins": plugins.loaded()}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _canonical(item: Any) -> str:
    value = dataclasses.asdict(item) if dataclasses.is_dataclass(item) else item
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def data_checksum(splits: Mapping[str, Sequence[Any]]) -> str:
    """sha256 over every split's items in their canonical text (words and every annotation, as JSON with
    sorted keys), splits in name order: equal data gives an equal checksum wherever it was read."""
    digest = hashlib.sha256()
    for split in sorted(splits):
        digest.update(f"split {split} {len(splits[split])}\n".encode())
        for item in splits[split]:
            digest.update(_canonical(item).encode())
            digest.update(b"\n")
    return digest.hexdigest()


class Stopwatch:
    """Start time (ISO, UTC) and wall time of a piece of work."""

    def __init__(self) -> None:
        self.start_time, self._start = now_iso(), time.perf_counter()

    def fields(self) -> dict[str, Any]:
        return {"start_time": self.start_time, "wall_time_s": time.perf_counter() - self._start}
