"""The commands as Python functions: ``structattn.compare``, ``structattn.train`` and ``structattn.probe`` do
what ``structattn compare``, ``structattn train`` and ``structattn probe`` do, and return what they write
(records, rows) instead of printing it. The commands call these same functions (``structattn.cli``), so both
refuse a used output folder the same way, record the same plugins and write the same files.

    import structattn

    records = structattn.compare("configs/quickstart.gin", "runs/q", overrides=["training.max_steps = 4"])

A config is a path to a ``.gin`` file or the text of one (a ``str`` with a newline, a binding or an ``include``
is text, see :func:`is_config_text`). Includes in a config text resolve as in a file of
their own folder: from the repository's ``configs/`` (``include 'models/tiny.gin'``), then the working folder.

Differences from the commands: nothing is printed (progress bars aside, off with ``quiet=True`` or ``$CI``);
``threads=None`` keeps torch's thread count but caps it at the cores not busy now, as the commands' default
does (a config's ``compare.threads`` / ``train.threads`` still wins), and the caller's count is restored when the
function returns; provenance records the process's own command line (``sys.argv``).

This module imports nothing heavy; each function imports what it runs.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

from structattn.command_line import busy_aware_threads, check_not_an_input
from structattn.experiments.outputs import MODES
from structattn.experiments.probe_options import PROBES
from structattn.progress import progress_disabled


def compare(config_or_path: str | os.PathLike, out: str | os.PathLike, *, overrides: str | Sequence[str] = (),
            mode: str = "refuse", shard: str | tuple[int, int] | None = None, quiet: bool = False,
            plots: bool = True, threads: int | None = None, imports: Sequence[str] = (),
            dry_run: bool = False, dask: str | None = None, time_limit: float | str | None = None,
            reuse: str | os.PathLike | Sequence[str | os.PathLike] = ()) -> Any:
    """Train and compare every task x setting x seed of a config, as ``structattn compare``.

    Args:
        config_or_path: a ``.gin`` file, or the text of a config.
        out: the output folder (``results.csv``, ``significance.csv``, ``results.md``, ``config.gin``,
            ``comparison.json``, ``provenance.json``, ``runs/`` with each run's ``log.jsonl`` / ``log.csv``,
            ``plots/``).
        overrides: extra gin bindings (``--gin-param``), e.g. ``["training.max_steps = 4"]``.
        mode: ``"refuse"`` a folder holding outputs, ``"resume"`` it (``--resume``) or ``"overwrite"`` it.
        shard: ``"i/N"`` or ``(i, N)``: run only shard ``i`` of ``N`` (``--shard``).
        quiet: no progress bars (also off when ``$CI`` is set).
        plots: write ``plots/`` (``--no-plots`` is ``plots=False``).
        threads: torch's intra-op threads (``--threads``; wins over ``compare.threads`` of the config).
        imports: plugin modules or ``.py`` files imported first, after the installed entry points
            (``--import``); recorded with the runs.
        dry_run: only build every setting and run it forward once (``--dry-run``); returns the
            :class:`~structattn.experiments.compare.Comparison`.
        dask: run every run as one Dask task on the scheduler at this address (``"tcp://host:8786"``) or on a
            local cluster of N single-threaded worker processes (``"local:N"``); ``--dask``, wins over the
            config's ``compare.dask`` (see docs/cluster.md).
        time_limit: ``"2h40m"``, ``"90m"`` or seconds (``--time-limit``): after that long the run in progress
            writes its ``last.pt`` and stops, no further run starts, and a line on stderr says what finished
            and what is left; call again with ``mode="resume"`` to continue. Serial runs only.
        reuse: folders of other comparisons (compare folders, kept folders, or folders of shard folders;
            ``--reuse``, repeatable): a run of this comparison not finished in ``out`` whose run key (task spec,
            plan, seed and setup) matches a record there is copied in, relabelled and with
            ``provenance.reused_from``, instead of being trained (see :mod:`structattn.experiments.reuse`).

    Returns:
        The records of the finished runs (one dict per run: ``run_id``, ``metrics``, ``history``, ...), a list
        whose ``left`` attribute names the runs a time limit left unfinished (empty otherwise).

    Raises:
        ValueError: a bad config or binding, an unknown ``mode`` or ``shard``, ``out`` holds outputs and
            ``mode`` is ``"refuse"``, ``out`` would overwrite the config, or a ``reuse`` folder is missing, not
            a compare folder, or holds a match that is refused (another precision, other data, or two matches
            whose metrics differ; both files named).
        FileNotFoundError: no such config file, or an include found nowhere.
    """
    from structattn.experiments import gin_setup
    from structattn.experiments.outputs import COMPARE_OUTPUTS
    from structattn.experiments.shards import parse_shard

    _start(mode, imports)
    with config_file(config_or_path) as path:
        check_not_an_input(out, [path], written=COMPARE_OUTPUTS)
        shard = parse_shard(shard if shard is None or isinstance(shard, str) else "/".join(map(str, shard)))
        if time_limit is not None:
            from structattn.training.deadline import parse_duration

            parse_duration(time_limit)  # a bad duration fails before anything is read or trained
        if dask is not None:
            if not isinstance(dask, str):
                raise ValueError(f"dask must be a scheduler address or 'local:N', got {dask!r}")
            overrides = [*([overrides] if isinstance(overrides, str) else overrides), f"compare.dask = {dask!r}"]
        parse_config(path, overrides, threads, "compare")
    reuse = [reuse] if isinstance(reuse, (str, os.PathLike)) else list(reuse)
    with gin_suffix_removed(), busy_aware_threads(None):  # an explicit `threads` is bound in gin above
        return gin_setup.compare(out, shard=shard, quiet=progress_disabled(quiet), dry_run=dry_run, plots=plots,
                                 mode=mode, time_limit=time_limit, reuse=reuse)


def train(config_or_path: str | os.PathLike, out: str | os.PathLike, *, overrides: str | Sequence[str] = (),
          mode: str = "refuse", quiet: bool = False, threads: int | None = None, imports: Sequence[str] = (),
          dry_run: bool = False) -> dict[str, Any] | None:
    """Train one model from a config (``train.task``, ``train.attention``, ``train.seed``), as
    ``structattn train``.

    Args:
        config_or_path: a ``.gin`` file, or the text of a config.
        out: the output folder (``record.json``, ``config.gin``, results tables, ``checkpoints/``,
            ``log.jsonl``, ``log.csv`` and ``tb/`` when ``tensorboard`` is installed).
        overrides, mode, quiet, threads, imports: as for :func:`compare` (``threads`` wins over
            ``train.threads``); ``mode="resume"`` continues from ``out/checkpoints/last.pt``.
        dry_run: only build the model and run it forward once; returns ``None``.

    Returns:
        The run's record (``record.json``).

    Raises:
        ValueError, FileNotFoundError: as for :func:`compare`; on resume, a checkpoint trained with other
            settings.
    """
    from structattn.experiments import gin_setup
    from structattn.experiments.outputs import TRAIN_OUTPUTS

    _start(mode, imports)
    with config_file(config_or_path) as path:
        check_not_an_input(out, [path], written=TRAIN_OUTPUTS)
        parse_config(path, overrides, threads, "train")
    with gin_suffix_removed(), busy_aware_threads(None):  # an explicit `threads` is bound in gin above
        return gin_setup.train(out, quiet=progress_disabled(quiet), mode=mode, dry_run=dry_run)


def probe(model: str | os.PathLike, treebank: str | os.PathLike, out: str | os.PathLike, *,
          probes: str | Sequence[str] = PROBES,
          layers: str | Sequence[int] | None = None, control: bool = True, limit: int | None = None,
          test_fraction: float = 0.25, epochs: int = 30, seed: int = 0, overwrite: bool = False,
          quiet: bool = False, threads: int | None = None, imports: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Structural probes and attention trees per layer, as ``structattn probe`` (see
    :mod:`structattn.experiments.probe_command`).

    Args:
        model: a local HF model directory with its tokenizer, or a structattn checkpoint (``best.pt`` /
            ``last.pt``).
        treebank: a CoNLL-U file with gold trees.
        out: the output folder (``probe.csv``, ``probe.md``, ``probe.png``); refused when not empty unless
            ``overwrite``.
        probes: probe names (or a comma list), from :data:`~structattn.experiments.probe_options.PROBES`.
        layers: ``None`` (all), layer numbers (0 = embeddings), or ``"0,2-4"`` as ``--layers`` takes.
        control: also probe the same architecture with random weights.
        limit: use only the first ``limit`` sentences.
        test_fraction, epochs, seed: the held-out share, probe training epochs, and the seed.
        overwrite: write into a folder that is not empty.
        quiet: no progress bars.
        threads: torch's intra-op threads (``--threads``); ``None``: torch's count capped at the cores not busy.
        imports: plugin modules or ``.py`` files imported first (``--import``).

    Returns:
        The rows of ``probe.csv`` (``model, layer, head, probe, metric, value``).

    Raises:
        ValueError: ``out`` is not empty (without ``overwrite``) or would overwrite an input, a count is below
            1, or ``model`` is neither an HF directory nor a checkpoint file.
    """
    from structattn.experiments.probe_cli import probe as probe_to_folder

    _start("refuse", imports)
    with busy_aware_threads(threads):
        return probe_to_folder(model, treebank, out, probes=probes, layers=layers, control=control, limit=limit,
                               test_fraction=test_fraction, epochs=epochs, seed=seed, overwrite=overwrite,
                               quiet=quiet)


def _start(mode: str, imports: Sequence[str]) -> None:
    """Check ``mode``, then load the installed plugin entry points and ``imports``, as every command does first."""
    from structattn import plugins

    if mode not in MODES:
        raise ValueError(f"output mode must be one of {MODES}, got {mode!r}")
    if isinstance(imports, (str, os.PathLike)):
        imports = [imports]
    plugins.load_entry_points()
    plugins.load_plugins([str(spec) for spec in imports])


def parse_config(path: Path, overrides: str | Sequence[str], threads: int | None, root: str) -> None:
    """Load the config at ``path`` with ``overrides`` into gin, plus ``ROOT.threads = N`` when ``threads`` is
    given (it wins over the config's own binding), as the commands do with ``--gin-param`` and ``--threads``."""
    from structattn.experiments import gin_setup

    bindings = [overrides] if isinstance(overrides, str) else list(overrides)
    gin_setup.parse(path, bindings + ([f"{root}.threads = {threads}"] if threads is not None else []))


@contextlib.contextmanager
def gin_suffix_removed() -> Iterator[None]:
    """Raise the error a gin-configured function raised, not gin's copy of it with ``In call to configurable
    'compare' (<function ...>)`` appended (the commands cut that suffix from their one-line errors too).

    gin re-raises a proxy of the original exception (same type name, ``__context__`` the original); the
    original is found by walking that chain while the messages only grow by gin's suffix.
    """
    try:
        yield
    except Exception as err:
        original = err
        while (" In call to configurable " in str(original) and original.__context__ is not None
               and str(original).startswith(str(original.__context__))):
            original = original.__context__
        if original is err:
            raise
        raise original from None


def is_config_text(config_or_path: str | os.PathLike) -> bool:
    """Whether ``config_or_path`` is the text of a config rather than a file: a ``str`` with more than one line,
    a binding (``=``) or an ``include`` / ``import`` line; a path object is always a file."""
    if not isinstance(config_or_path, str):
        return False
    text = config_or_path.strip()
    return "\n" in text or "=" in text or text.split(" ", 1)[0] in ("include", "import")


@contextlib.contextmanager
def config_file(config_or_path: str | os.PathLike) -> Iterator[Path]:
    """The config as a file: the path as given, or config text written to a temporary file.

    The temporary file sits two empty folders deep (``TMP/config/text/config.gin``), since an include is
    looked for in the including file's folder and its two parents before the repository's ``configs/``: no
    stray ``/tmp/models/`` can shadow ``configs/models/``. Errors that name the temporary file name "the config
    text" instead.
    """
    if not is_config_text(config_or_path):
        yield Path(config_or_path)
        return
    with tempfile.TemporaryDirectory(prefix="structattn-config-") as folder:
        path = Path(folder) / "config" / "text" / "config.gin"
        path.parent.mkdir(parents=True)
        path.write_text(str(config_or_path), encoding="utf-8")
        try:
            yield path
        except (ValueError, FileNotFoundError) as err:
            message = str(err).replace(repr(str(path)), "the config text").replace(str(path), "the config text")
            if message == str(err):
                raise
            raise type(err)(message) from None
