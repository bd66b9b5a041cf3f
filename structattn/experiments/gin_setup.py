"""The one gin-aware module: gin names for the configuration pieces and the two roots, ``train`` and
``compare``. Library classes stay gin-free; configs bind the functions below.

gin names (what ``.gin`` files bind)::

    model.d_model / num_layers / num_heads / ffn_dim / dropout / positions / max_len  -> EncoderConfig
    training.lr / weight_decay / warmup_steps / max_steps / batch_size / clip_norm / eval_every / patience
    data.structures (name -> provider spec), data.min_freq / max_size / lowercase / subword_chars / cache
    train.task, train.attention, train.seed, train.threads                    (root of ``structattn train``)
    compare.tasks, compare.settings, compare.seeds, compare.threads, compare.probes, compare.reference,
    compare.dask (root of ``structattn compare``)
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tokenize
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import gin
import torch

from structattn import plugins
from structattn.encoders.config import EncoderConfig
from structattn.experiments.compare import Comparison, run_comparison, train_one
from structattn.experiments.spec import Setup
from structattn.training import distributed
from structattn.training.config import TrainConfig
from structattn.training.values import as_bool, as_float, as_int


@gin.configurable("model")
def model_config(d_model: int = gin.REQUIRED, num_layers: int = gin.REQUIRED, num_heads: int = gin.REQUIRED,
                 ffn_dim: int = gin.REQUIRED, dropout: float = 0.1, positions: str = "sinusoidal",
                 max_len: int = 512) -> EncoderConfig:
    """Encoder sizes (``configs/models/*.gin``)."""
    sizes = [as_int(f"model.{name}", value) for name, value in
             (("d_model", d_model), ("num_layers", num_layers), ("num_heads", num_heads), ("ffn_dim", ffn_dim))]
    if not isinstance(positions, str):
        raise ValueError(f"model.positions must be a name in quotes, got {positions!r}")
    return EncoderConfig(*sizes, as_float("model.dropout", dropout), positions, as_int("model.max_len", max_len))


#: ``training.<field>`` binds any :class:`TrainConfig` field (unknown names fail when the config is parsed).
training_config = gin.external_configurable(TrainConfig, "training")


@gin.configurable("data")
def data_options(structures: Mapping[str, str] | None = None, min_freq: int = 1, max_size: int | None = None,
                 lowercase: bool = True, subword_chars: int | None = None, subword_model: str | None = None,
                 subword_size: int | None = None,
                 cache: str | None = None) -> tuple[dict[str, str], dict[str, Any], str | None]:
    """Structure specs by name, vocabulary options, and the structure disk cache folder (``cache``, filled
    by ``structattn structures cache`` or on first use).

    ``subword_model`` (``"bpe"`` or ``"unigram"``) and/or ``subword_size`` (pieces, specials included) ask for
    a subword vocabulary trained on the train split (translation runs; defaults ``"bpe"`` and 8000 when only
    the other is given); they exclude ``subword_chars`` and ``max_size``."""
    vocab = {"min_freq": as_int("data.min_freq", min_freq),
             "max_size": None if max_size is None else as_int("data.max_size", max_size),
             "lowercase": as_bool("data.lowercase", lowercase)}
    chars = None if subword_chars is None else as_int("data.subword_chars", subword_chars)
    if chars:  # None or 0: word-level
        vocab["subword_chars"] = chars
    if subword_model is not None or subword_size is not None:
        vocab.update(learned_subwords(subword_model, subword_size, vocab))
    return dict(structures or {}), vocab, cache


def learned_subwords(model: str | None, size: int | None, vocab: Mapping[str, Any]) -> dict[str, Any]:
    """The ``subword_model`` / ``subword_size`` vocabulary options, checked (see :func:`data_options`)."""
    from structattn.seq2seq.subword import MODELS

    model = "bpe" if model is None else model
    if model not in MODELS:
        raise ValueError(f"data.subword_model must be one of {list(MODELS)}, got {model!r}")
    size = 8000 if size is None else as_int("data.subword_size", size)
    if size < 5:
        raise ValueError(f"data.subword_size must be > 4 (the specials), got {size}")
    clash = [name for name in ("subword_chars", "max_size") if vocab.get(name)]
    if clash:
        raise ValueError(f"data.subword_model / data.subword_size cannot go with data.{' or data.'.join(clash)}: "
                         f"a trained subword vocabulary has subword_size pieces")
    return {"subword_model": model, "subword_size": size}


def make_setup(probes: Sequence[str] = ()) -> Setup:
    """The shared run settings from the bound ``model``, ``training`` and ``data`` (plus probe steps)."""
    from structattn.experiments.probe_steps import check_probe_steps

    structures, vocab, cache = data_options()
    return Setup(model_config(), training_config(), structures, vocab, cache, check_probe_steps(probes))


@gin.configurable("train", denylist=["out_dir", "quiet", "mode", "dry_run"])
def train(out_dir: str | Path, *, task: str = gin.REQUIRED, attention: str = gin.REQUIRED, seed: int = 0,
          threads: int | None = None, quiet: bool = False, mode: str = "refuse",
          dry_run: bool = False) -> dict[str, Any] | None:
    """Root of ``structattn train``: one run, written to ``out_dir`` (record, checkpoints, config);
    ``mode``: ``"refuse"`` a folder holding outputs, ``"resume"`` (continue from
    ``out_dir/checkpoints/last.pt`` when it exists) or ``"overwrite"``; ``threads`` sets torch's intra-op CPU
    threads (default: torch's own choice)."""
    set_threads(threads, "train.threads")
    comparison = Comparison.declare({task: task}, {attention: attention}, [as_int("train.seed", seed)], make_setup())
    if dry_run:
        comparison.dry_run()
        return None
    context = distributed.setup()
    try:
        return train_one(comparison, out_dir, config=gin.operative_config_str(), quiet=quiet, context=context,
                         mode=mode)
    finally:
        distributed.teardown()


@gin.configurable("compare", denylist=["out_dir", "shard", "quiet", "dry_run", "plots", "mode", "time_limit", "reuse"])
def compare(out_dir: str | Path | None = None, *, tasks: Sequence[str] | Mapping[str, str] = gin.REQUIRED,
            settings: Sequence[str] | Mapping[str, str] = gin.REQUIRED, seeds: Sequence[int] = (0,),
            threads: int | None = None, shard: tuple[int, int] | None = None, quiet: bool = False,
            dry_run: bool = False, plots: bool = True, probes: Sequence[str] = (),
            mode: str = "refuse", reference: str | None = None,
            dask: str | None = None, time_limit: float | str | None = None,
            training_by_setting: Mapping[str, Mapping[str, Any]] | None = None,
            reuse: Sequence[str | Path] = ()) -> list[dict[str, Any]] | Comparison:
    """Root of ``structattn compare``: every task x setting x seed (or one shard of them) into ``out_dir``
    (a shard into ``out_dir/shard-i-of-N/``, see :func:`~structattn.experiments.shards.shard_folder`);
    ``threads`` and ``mode`` as for :func:`train`; ``probes``: probe steps run after each training
    (:mod:`structattn.experiments.probe_steps`); ``reference``: the setting label the others are tested against
    in ``significance.csv`` and ``results.md`` (``compare.reference = "full"``; default: ``"full"`` when a
    setting is labelled so, else the first setting), checked before any training and kept in ``comparison.json``
    for ``merge``; ``dask``: run every run as a Dask task on the scheduler at this address, or on a local
    cluster of N worker processes with ``"local:N"`` (``--dask``; see
    :mod:`structattn.experiments.executors`; default: one run after another here); ``time_limit``: stop at a
    checkpoint after that long (``--time-limit``, see :func:`~structattn.experiments.compare.run_comparison`);
    ``training_by_setting``: training options of one setting that differ from ``training.*``
    (``compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}``: each setting at its own tuned rate);
    ``reuse``: folders of other comparisons whose finished runs identical to this comparison's are copied in
    instead of trained (``--reuse``, see :mod:`structattn.experiments.reuse`)."""
    from structattn.experiments.executors import make_executor, parse_address
    from structattn.experiments.shards import shard_folder

    set_threads(threads, "compare.threads")
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise ValueError(f"compare.seeds must be a list of integers, got {seeds!r}")
    seeds = [as_int(f"compare.seeds[{k}]", seed) for k, seed in enumerate(seeds)]
    if training_by_setting is not None and not (isinstance(training_by_setting, Mapping) and all(
            isinstance(v, Mapping) for v in training_by_setting.values())):
        raise ValueError("compare.training_by_setting must be a dict {setting label: {training option: value}}, got "
                         f"{training_by_setting!r}")
    comparison = Comparison.declare(tasks, settings, seeds, make_setup(probes), training_by_setting)
    if reference is not None and (not isinstance(reference, str) or reference not in comparison.settings):
        raise ValueError(f"compare.reference must be one of the setting labels {list(comparison.settings)}, "
                         f"got {reference!r}")
    if dask is not None and not isinstance(dask, str):
        raise ValueError(f"compare.dask must be a scheduler address or 'local:N' in quotes, got {dask!r}")
    if dask:
        parse_address(dask)
    if dry_run:
        comparison.dry_run()
        return comparison
    context = distributed.setup()
    try:
        with make_executor(dask, context, quiet) as executor:
            return run_comparison(comparison, shard_folder(out_dir, shard), shard=shard,
                                  config=gin.operative_config_str(), quiet=quiet, context=context, plots=plots,
                                  mode=mode, reference=reference, executor=executor, time_limit=time_limit,
                                  reuse=reuse)
    finally:
        distributed.teardown()


def set_threads(threads: int | None, name: str = "threads") -> None:
    """Set torch's intra-op threads (tiny models on a few CPU cores run fastest on one)."""
    if threads is not None:
        threads = as_int(name, threads)
        if threads < 1:
            raise ValueError(f"{name} must be >= 1, got {threads}")
        torch.set_num_threads(threads)


def _guard_resource_reader() -> None:
    """Make gin's package-resource lookup treat "not a regular package" as "not found".

    gin tries ``include 'runs/defaults.gin'`` as a file of a Python package named ``runs``; when the working
    directory holds a plain folder of that name (e.g. the output folder ``runs/``) and is on ``sys.path``
    (``python -m``, or plugin imports, which put the working folder there), it is found as a namespace package
    without a file and gin crashes with a TypeError instead of trying the next search path.

    This patches ``gin.config._FILE_READERS`` (private): gin 0.5 has no public API to replace or wrap a
    registered reader (``gin.register_file_reader`` only appends, after the crashing one, which
    ``gin.resource_reader`` registers at import). The patch is idempotent and only turns the TypeError into
    "not found".
    """
    for k, (reader, exists) in enumerate(gin.config._FILE_READERS):
        if getattr(exists, "_structattn_guarded", False):
            continue

        def guarded(path: str, _exists=exists) -> bool:
            try:
                return bool(_exists(path))
            except TypeError:
                return False

        guarded._structattn_guarded = True  # type: ignore[attr-defined]
        gin.config._FILE_READERS[k] = (reader, guarded)


#: The repository's configs/ (an editable install or a checkout); the second place an include is looked for.
REPOSITORY_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


class IncludeResolver:
    """Where ``include 'x.gin'`` is found: the folder of the file that says it (then that folder's parent and
    grandparent, so ``configs/experiments/a.gin`` can include ``models/tiny.gin``), then the repository's
    ``configs/``, then the working folder. An absolute path is taken as it is.

    gin resolves an include against one global list of search paths, which knows nothing of the including
    file: a user's config in another folder that includes ``configs/quickstart.gin`` failed on the latter's
    own ``include 'runs/defaults.gin'``. This object is a gin file reader (``exists`` / ``open``) that keeps
    the stack of files being read (gin reads an included file inside the ``with`` of the including one), put
    first in gin's reader list for the duration of :func:`parse` (``gin.config._FILE_READERS`` is private;
    ``gin.register_file_reader`` only appends, after gin's own reader of the working folder).
    """

    def __init__(self) -> None:
        self.folders: list[Path] = []  # folders of the files being read, innermost last
        self.missing: tuple[str, list[Path]] | None = None  # the last include found nowhere, and where looked

    def search_folders(self) -> list[Path]:
        """Where a relative include is looked for, in order (see the class docstring)."""
        near = [*self.folders[-1:], *self.folders[-1].parents][:3] if self.folders else []
        return list(dict.fromkeys([*near, REPOSITORY_CONFIGS, Path.cwd()]))

    def find(self, name: str) -> Path | None:
        folders = [Path()] if os.path.isabs(name) else self.search_folders()
        found = next((folder / name for folder in folders if (folder / name).is_file()), None)
        if found is not None:
            self.missing = None
        elif self.missing is None:  # the first miss: gin then retries the name under its other search paths
            self.missing = (name, folders)
        return found

    def exists(self, name: str) -> bool:
        return self.find(name) is not None

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[Any]:
        path = self.find(name)
        assert path is not None, name  # gin asks exists() first
        self.folders.append(path.resolve().parent)
        try:
            with open(path, encoding="utf-8") as handle:
                yield handle
        finally:
            self.folders.pop()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Put this reader first in gin's list while the block runs."""
        entry = (self.open, self.exists)
        gin.config._FILE_READERS.insert(0, entry)
        try:
            yield
        finally:
            gin.config._FILE_READERS.remove(entry)

    def not_found(self, error: OSError) -> OSError:
        """gin's 'Unable to open file' as one line naming the include and every folder looked in."""
        if self.missing is None:
            return error
        name, folders = self.missing
        where = "it is an absolute path" if os.path.isabs(name) else "looked in " + ", ".join(map(str, folders))
        return FileNotFoundError(f"gin include {name!r} not found; {where}")


def _imports_of(parsed: Any) -> list[str]:
    """Module names of the ``import`` lines of a parsed config file and the files it includes."""
    names = list(parsed.imports)
    for nested in parsed.includes:
        names += _imports_of(nested)
    return names


def parse(config_file: str | Path, bindings: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Clear gin and load ``config_file`` plus ``bindings``. An ``include`` resolves from the folder of the
    file that says it (and its two parents), then the repository's ``configs/``, then the working folder (see
    :class:`IncludeResolver`); an include in ``bindings`` resolves as if ``config_file`` said it.

    ``import`` lines (in the files or the bindings) resolve from the working folder and the installed
    packages, and are recorded as plugins (:mod:`structattn.plugins`); returns their records.
    """
    path = Path(config_file)
    if not path.is_file():
        raise FileNotFoundError(f"no such config file: {str(path)!r}")
    gin.clear_config()
    _guard_resource_reader()
    plugins.working_folder_on_path()
    resolver = IncludeResolver()
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)  # gin logs "Path not found" for every search path it tries before the right one
    try:
        with resolver.installed():
            imports = _imports_of(gin.parse_config_file(str(path.resolve())))
            resolver.folders.append(path.resolve().parent)  # includes among the bindings: as if the file said them
            imports += gin.parse_config(list(bindings))[1]
        gin.finalize()
    except OSError as err:
        raise resolver.not_found(err) from None
    except (SyntaxError, tokenize.TokenError) as err:
        raise ValueError(f"cannot parse {str(path)!r} or the --gin-param bindings: {err}") from None
    except ModuleNotFoundError as err:  # gin re-raises it with the location added and without ``name``
        found = re.search(r"No module named '([^']+)'", str(err))
        name = err.name or (found.group(1) if found else str(err))
        raise ValueError(f"{str(path)!r} imports module {name!r}, which is not found (looked in the working "
                         f"folder {os.getcwd()!r} and the installed packages)") from None
    finally:
        logging.disable(previous)
    names = [n for n in dict.fromkeys(imports) if not n.startswith("__gin__")]
    return plugins.record_imported(names, f"gin import in {str(path)!r}")
