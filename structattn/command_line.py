"""How every ``structattn`` command is built: one parser factory that gives each command (and each nested
sub-command) the shared flags, and one function that applies them.

Shared flags, in every ``--help``:

* ``--import MODULE_OR_FILE`` (repeatable): plugins imported before anything else (``structattn.cli`` takes
  them out of the command line first, so that a plugin's names are known when the parser is built);
* ``--quiet``: no progress bars (also off when ``$CI`` is set), transformers' own bars included;
* ``--threads N``: torch's intra-op CPU threads. The default (:func:`default_threads`) is the number of cores
  not already busy (the 1-minute load average subtracted, at least 1), so a command never oversubscribes a
  busy machine; the choice is said on a terminal's stderr unless ``--quiet``, and every run records it
  (``provenance.json``).

This module imports nothing heavy: a command's ``--help`` answers without importing torch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from structattn.progress import progress_disabled


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``structattn parse: error: argument --processes:
    must be >= 1, got 0``, exit status 2), as every other structattn error is; ``--help`` shows the usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def default_threads() -> int:
    """Cores not busy right now: ``cpu_count - round(1-minute load average)``, at least 1 (all cores when the
    load is unknown)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return cores
    return max(1, min(cores, cores - round(load)))


@contextlib.contextmanager
def busy_aware_threads(threads: int | None) -> Iterator[int]:
    """torch's intra-op threads for the length of a long Python call, restored afterwards: ``threads`` when
    given (>= 1), else torch's current count capped at the cores not busy now (:func:`default_threads`).

    The Python entry points (``structattn.compare``, ``train``, ``probe``, ``train_predictor``) use it so that,
    like the commands, they never oversubscribe a busy machine: with two threads on a 2-core machine where
    another process holds one core, every multi-threaded op waits for a descheduled thread (training the
    parser-free predictor ran 20x slower so). It never raises the count above the caller's own
    ``torch.set_num_threads``. Yields the count in use.
    """
    import torch

    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a whole number >= 1 or None, got {threads!r}")
    before = torch.get_num_threads()
    chosen = threads if threads is not None else min(before, default_threads())
    torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        torch.set_num_threads(before)


def positive_int(text: str) -> int:
    """An ``argparse`` type: an integer >= 1 (a count of things), with a clear message otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def add_shared_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``parser`` the flags every command takes (see the module docstring); returns it."""
    group = parser.add_argument_group("shared by every command")
    group.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE_OR_FILE",
                       help="import a plugin first: a module (from the working folder or installed) or a .py "
                            "file; repeatable, recorded in the outputs and replayed by eval and merge")
    if not any("--quiet" in a.option_strings for a in parser._actions):
        group.add_argument("--quiet", action="store_true", help="no progress bars (also when $CI or $STRUCTATTN_QUIET is set)")
    group.add_argument("--threads", type=positive_int, default=None,
                       help="torch intra-op CPU threads (default: the cores not already busy, printed)")
    return parser


def command_parser(prog: str, description: str | None = None, **kwargs: Any) -> argparse.ArgumentParser:
    """A command's parser, with the shared flags (add the command's own arguments to it)."""
    return add_shared_flags(CommandParser(prog=prog, description=description, **kwargs))


def add_subcommand(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A nested sub-command (``structattn structures demo``), with the shared flags (``sub`` comes from
    ``add_subparsers`` of a :func:`command_parser`, so that its usage errors are one line too)."""
    return add_shared_flags(sub.add_parser(name, **kwargs))


def apply_shared_flags(args: argparse.Namespace, uses_torch: bool = True) -> None:
    """Set torch's threads (``--threads`` or :func:`default_threads`, said on a terminal unless quiet) and silence
    transformers' progress bars and info logs when quiet. A command that runs no torch (``uses_torch=False``:
    ``parse``) only gets ``OMP_NUM_THREADS`` set, so it does not pay for importing torch."""
    quiet = progress_disabled(getattr(args, "quiet", False))
    threads = getattr(args, "threads", None)
    chosen = threads if threads is not None else default_threads()
    if uses_torch or "torch" in sys.modules:
        import torch

        torch.set_num_threads(chosen)
    else:
        os.environ["OMP_NUM_THREADS"] = str(chosen)
    if not quiet and sys.stderr.isatty():  # said to a person; runs record it in provenance.json
        how = "--threads" if threads is not None else "default: cores not busy; --threads to change"
        print(f"structattn: {chosen} thread{'s' if chosen > 1 else ''} ({how})", file=sys.stderr)
    if quiet:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        if "transformers" in sys.modules:
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()


def check_not_an_input(out: str | os.PathLike, inputs: Iterable[str | os.PathLike | None], *,
                       written: Sequence[str] | None = None, flag: str = "--out") -> None:
    """Refuse an output that would overwrite (or, with ``--overwrite``, remove) one of the command's inputs.

    Args:
        out: the output file, or the output folder when ``written`` is given.
        inputs: the input files and folders (``None`` entries and paths that do not exist are skipped).
        written: for an output folder, the names the command writes or removes in it (an input among them,
            or inside one of them, is refused); ``None``: ``out`` is a file or a folder written as a whole (an
            input equal to it or inside it is refused).

    Raises:
        ValueError: naming the flag, the output and the input; the same file under another name (a hard link,
            a symlink) counts as the same.
    """
    out = Path(out)
    targets = [out] if written is None else [out / name for name in written]
    for given in inputs:
        if given is None or not Path(given).exists():
            continue
        source = Path(given)
        for target in targets:
            if _same_file(source, target) or _inside(source, target):
                raise ValueError(f"{flag} {str(out)!r} would overwrite the input {str(given)!r}; write the output "
                                 "somewhere else")


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> bool:
    return folder.is_dir() and path.resolve().is_relative_to(folder.resolve())
