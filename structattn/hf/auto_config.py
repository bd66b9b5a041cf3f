"""Config classes of attached models: ``model_type`` ``"structattn_<family>"`` (see :mod:`structattn.hf.auto`).

:func:`mark_attached` re-classes an attached model's config to a subclass of its family's config (created and
registered in ``AutoConfig`` once per family) whose only difference is the ``model_type`` that
``save_pretrained`` writes; :func:`split_config` gives the family's plain config back for loading.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

#: Prefix of the registered model types: ``"structattn_" + family model type``.
PREFIX = "structattn_"
#: The key of ``config.json`` holding the plan (``structattn.hf.attach.CONFIG_KEY``; repeated here so that this
#: module stays light).
CONFIG_KEY = "structattn"
_CONFIGS: dict[type, type] = {}  # family config class -> structattn config class


def attached_model_type(base_model_type: str) -> str:
    """The ``model_type`` an attached ``base_model_type`` model is saved with (``"bert"`` -> ``"structattn_bert"``)."""
    return base_model_type if base_model_type.startswith(PREFIX) else PREFIX + base_model_type


def base_model_type(model_type: str) -> str:
    """The family's own ``model_type`` behind a saved one (``"structattn_bert"`` -> ``"bert"``; others unchanged)."""
    return model_type[len(PREFIX):] if model_type.startswith(PREFIX) else model_type


def config_class_for(base: type) -> type:
    """The structattn config class over the family config class ``base`` (``BertConfig`` ->
    ``StructattnBertConfig``, model type ``structattn_bert``), created and registered in ``AutoConfig`` once.
    ``base`` may already be a structattn config class (returned as is)."""
    if getattr(base, "base_config_class", None) is not None:
        return base
    if base not in _CONFIGS:
        from transformers import AutoConfig

        cls = type(f"Structattn{base.__name__}", (base,), {
            "model_type": attached_model_type(base.model_type), "base_config_class": base, "__module__": __name__,
            "__doc__": f"{base.__name__} of a model with structattn attached.",
        })
        AutoConfig.register(cls.model_type, cls, exist_ok=True)
        _CONFIGS[base] = cls
    return _CONFIGS[base]


def mark_attached(model: nn.Module) -> nn.Module:
    """Re-class ``model.config`` to its structattn config class, so that ``save_pretrained`` writes the
    ``structattn_<family>`` model type (idempotent; every config attribute stays as it is).

    ``structattn.hf.attach`` is meant to call this once it has attached; until it does, every route that
    attaches in this package (``from_pretrained``, the Auto loaders) calls it after ``attach``. The Auto
    classes load the saved folder when the family is one of ``structattn.hf.auto.BASE_MODEL_TYPES``.

    Returns:
        ``model`` (its config re-classed in place).

    Raises:
        ValueError: ``model`` has no structattn plan in its config (it was not attached).
    """
    config = model.config
    if not getattr(config, CONFIG_KEY, None):
        raise ValueError(f"{type(model).__name__} has no structattn plan in its config: attach a plan before marking it")
    config.__class__ = config_class_for(type(config))
    return model


def split_config(config: Any) -> tuple[Any, dict[str, Any] | None]:
    """A copy of ``config`` as its family's own config class without the ``structattn`` entry, and that entry
    (``None`` when the config is not an attached one)."""
    plain = copy.deepcopy(config)
    plain.__class__ = getattr(type(config), "base_config_class", None) or type(config)
    saved = plain.__dict__.pop(CONFIG_KEY, None)
    return plain, saved
