"""Loading Hugging Face checkpoints, with or without structattn attention saved in them."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from structattn.hf.attach import CONFIG_KEY, attach
from structattn.hf.interface import base_of
from structattn.hf.local_models import ModelNotFoundError

__all__ = ["ModelNotFoundError", "attach_saved", "check_model_files", "from_pretrained", "load_attached"]


def from_pretrained(path: str | Path, plan: str | None = None, model_class: Any = None, **hf_options: Any) -> nn.Module:
    """Load a local checkpoint; rebuild its structattn attention when it was saved attached.

    A checkpoint written by ``save_pretrained`` of an attached model carries its plan in ``config.json``
    (key ``"structattn"``: plan, base attention, structure fields, structattn version) and the variants'
    parameters in its weights; both come back. A plain checkpoint loads as transformers would load it and is
    attached to ``plan`` when one is given.

    Args:
        path: a local model directory (no hub is contacted).
        plan: attach this plan to a plain checkpoint; for an attached checkpoint it must equal the saved plan.
        model_class: the transformers class to load (default: the checkpoint's ``architectures[0]``, else
            ``AutoModel``).
        hf_options: passed to ``model_class.from_pretrained``.

    Raises:
        ModelNotFoundError: (a ``FileNotFoundError`` and ``ValueError``) ``path`` is not a local directory with a ``config.json``; the message says how to
            fetch a hub model where a hub is reachable.
        ValueError: ``plan`` differs from the plan the checkpoint was saved with, or a file of the folder is
            truncated or damaged (:func:`check_model_files`; the message names the file).
    """
    path = Path(path)
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(
            f"no model directory at {str(path)!r} (no config.json there); structattn loads local directories only. "
            f"Where a hub is reachable, fetch a model first, e.g. `hf download bert-base-cased "
            f"--local-dir models/bert-base-cased`, or make a small one offline with `structattn pretrain`"
        )
    config = check_model_files(path)
    saved = config.get(CONFIG_KEY)
    if saved and plan is not None and plan != saved["plan"]:
        raise ValueError(f"{path} was saved with plan {saved['plan']!r}; got plan={plan!r}")
    cls = _concrete_class(model_class, config) if model_class is not None else _saved_class(config)
    if saved:
        return load_attached(cls, path, **hf_options)
    model = cls.from_pretrained(str(path), **hf_options)
    return attach_saved(model, {"plan": plan}) if plan is not None else model


def load_attached(family_class: Any, path: str | Path, *args: Any, config: Any = None, **hf_options: Any) -> nn.Module:
    """Load an attached folder into ``family_class`` (a transformers class such as ``BertForTokenClassification``)
    and re-attach its saved plan and parameters; the route of both :func:`from_pretrained` and the Auto classes
    (:mod:`structattn.hf.auto`).

    The model is built without its structattn parameters (transformers' loader would meet keys it does not know;
    its note about them is silenced), attached on the device of its weights, and the saved ``*.structattn.*``
    tensors are copied in; a missing one is an error. The base attention is the saved one (``sdpa`` or
    ``eager``) unless ``attn_implementation`` is given.

    Args:
        family_class: the transformers class to build.
        path: the local folder. config: its config as already read (``AutoModel`` passes it), or ``None``.
        hf_options: passed to ``family_class.from_pretrained``.

    Raises:
        ValueError: the folder was not saved attached, or lacks structattn parameters of its plan.
    """
    from structattn.hf.auto_config import split_config

    path = Path(path)
    if config is None:
        config = family_class.config_class.from_dict(check_model_files(path))
    plain, saved = split_config(config)
    if not saved:
        raise ValueError(f"{path}: config.json has no {CONFIG_KEY!r} entry, so the model was not saved attached")
    if hf_options.get("attn_implementation") is None:
        hf_options["attn_implementation"] = base_of(plain._attn_implementation or saved.get("base_attention"))
    with _quiet_unexpected_keys():
        model = family_class.from_pretrained(str(path), *args, config=plain, **hf_options)
    attach_saved(model, saved)
    _load_structattn_weights(model, path)
    return model


def attach_saved(model: nn.Module, saved: dict[str, Any]) -> nn.Module:
    """Attach ``saved["plan"]`` (with its ``structure_fields`` when recorded) and mark the config so that
    ``save_pretrained`` writes the structattn model type (:func:`structattn.hf.auto_config.mark_attached`)."""
    from structattn.hf.auto_config import mark_attached

    if getattr(model.config, CONFIG_KEY, None):
        delattr(model.config, CONFIG_KEY)
    attach(model, saved["plan"], structure_fields=saved.get("structure_fields"))
    mark_attached(model)
    return model


def check_model_files(path: Path) -> dict[str, Any]:
    """Read ``config.json`` and check the header of every ``*.safetensors`` file of a model folder, so that a
    truncated or damaged file fails here, named, instead of deep inside transformers or safetensors.

    Only the safetensors headers are read (they list every tensor's byte range, which must cover the file
    exactly), not the weights.

    Returns:
        the parsed ``config.json``.

    Raises:
        ValueError: ``config.json`` is not a JSON object, or a ``.safetensors`` file's header is invalid or does
            not match its size; the message names the file.
    """
    from safetensors import SafetensorError, safe_open

    file = path / "config.json"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{file} is not valid JSON ({error}); the file is truncated or damaged: copy or "
                         f"download it again") from None
    if not isinstance(config, dict):
        raise ValueError(f"{file} holds a JSON {type(config).__name__}, not the object of a model config")
    for file in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(str(file), framework="pt"):
                pass
        except SafetensorError as error:
            raise ValueError(f"{file} ({file.stat().st_size} bytes) is not a readable safetensors file ({error}); "
                             f"the file is truncated or damaged: copy or download it again") from None
    return config


def _saved_class(config: dict[str, Any]) -> Any:
    """The class named by ``architectures[0]``, else the family's ``AutoModel`` class."""
    import transformers

    names = config.get("architectures") or []
    if names and hasattr(transformers, names[0]):
        return getattr(transformers, names[0])
    return _concrete_class(transformers.AutoModel, config)


def _concrete_class(cls: Any, config: dict[str, Any]) -> Any:
    """``cls``, or for an Auto class the family's class it maps this ``config.json`` to (an attached type is
    read as its family's)."""
    if not hasattr(cls, "_model_mapping"):
        return cls
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from structattn.hf.auto_config import base_model_type

    family = base_model_type(str(config.get("model_type", "")))
    if family not in CONFIG_MAPPING:
        raise ValueError(f"config.json has model_type {config.get('model_type')!r}, which transformers does not know")
    return cls._model_mapping[CONFIG_MAPPING[family]]


def _load_structattn_weights(model: nn.Module, path: Path) -> None:
    """Copy the saved ``*.structattn.*`` tensors into the freshly attached modules."""
    from safetensors.torch import load_file

    own = {k: v for k, v in model.state_dict().items() if ".structattn." in k}
    found: dict[str, torch.Tensor] = {}
    for file in sorted(path.glob("*.safetensors")):
        found.update({_own_key(k, own, model): v for k, v in load_file(str(file)).items() if ".structattn." in k})
    missing = sorted(set(own) - set(found))
    if missing:
        raise ValueError(f"{path}: the checkpoint lacks structattn parameters {missing[:5]} of its saved plan")
    model.load_state_dict(found, strict=False)


def _own_key(key: str, own: dict[str, torch.Tensor], model: nn.Module) -> str:
    """The saved key as ``model`` names it: saved with a head and loaded bare (or the reverse) differ by the
    base model's prefix (``bert.``)."""
    prefix = getattr(model, "base_model_prefix", "") + "."
    if key in own or prefix == ".":
        return key
    if key.startswith(prefix) and key[len(prefix):] in own:
        return key[len(prefix):]
    return prefix + key if prefix + key in own else key


@contextmanager
def transformers_quiet(quiet: bool = True) -> Iterator[None]:
    """While inside, with ``quiet``: transformers' own progress bars ("Loading weights") and info logs are off
    (as ``--quiet`` and ``$CI`` turn them off for the commands); both are restored after."""
    if not quiet:
        yield
        return
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


class _quiet_unexpected_keys:
    """Silence transformers' report of the structattn keys that the plain class does not know (loaded after)."""

    def __enter__(self) -> None:
        from transformers.utils import logging as hf_logging

        self.level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()

    def __exit__(self, *exc: object) -> None:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity(self.level)
