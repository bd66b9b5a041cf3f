"""transformers' Auto classes load a saved attached model with its structattn attention, or refuse it loudly.

An attached model's config is re-classed (:func:`structattn.hf.auto_config.mark_attached`) to a subclass of its family's config whose
``model_type`` is ``"structattn_<family type>"`` (``"structattn_bert"``), so ``save_pretrained`` writes that
type into ``config.json``. Then:

* with structattn imported, ``AutoConfig`` knows the type (registered here) and every ``AutoModel*`` class
  that has a head for the family maps it to a loader (:class:`AttachedLoader`) that loads the family's own
  class, re-attaches the saved plan and loads the structattn parameters (:func:`structattn.hf.loading.load_attached`):
  the model that comes back is the plain transformers class (``BertModel``, ``BertForTokenClassification``,
  ...) with structattn attached, exactly what :func:`structattn.hf.from_pretrained` returns;
* without structattn, transformers refuses the folder (``ValueError``: "model type `structattn_bert` ... does
  not recognize this architecture"), never loading it silently as a model without the structure.

Registration needs transformers' ``configuration_auto`` module; ``import structattn.hf`` must stay light (a
command's ``--help`` does not import transformers), so :func:`install` registers at once when that module is
already imported and otherwise right after transformers' Auto modules are (an import hook, removed once it has run).
:func:`register_auto_classes` does the same explicitly.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from typing import TYPE_CHECKING, Any

from structattn.hf.auto_config import config_class_for, split_config

if TYPE_CHECKING:
    from torch import nn

#: Families whose structattn types are registered (config in ``AutoConfig``, loaders in the Auto model classes).
#: A folder of a family missing here is refused by the Auto classes (unknown model type) and still loads through
#: ``structattn.hf.from_pretrained``: add each family that ``attach`` learns here.
BASE_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "distilbert", "camembert", "modernbert", "deberta-v2",
                    "albert")
#: The Auto classes an attached folder loads through (each where the family has that head).
AUTO_CLASSES = ("AutoModel", "AutoModelForMaskedLM", "AutoModelForPreTraining", "AutoModelForSequenceClassification",
                "AutoModelForTokenClassification", "AutoModelForQuestionAnswering", "AutoModelForMultipleChoice")
_TRIGGER = "transformers.models.auto.configuration_auto"


def register_models(config_cls: type) -> None:
    """Map ``config_cls`` (a structattn config class) to an :class:`AttachedLoader` in every Auto class of
    :data:`AUTO_CLASSES` that has a head for its family (idempotent)."""
    import transformers

    for name in AUTO_CLASSES:
        auto = getattr(transformers, name)
        if config_cls in auto._model_mapping or config_cls.base_config_class not in auto._model_mapping:
            continue
        loader = type(f"Structattn{name[len('Auto'):]}Loader", (AttachedLoader,),
                      {"config_class": config_cls, "auto_class": auto, "__module__": __name__})
        auto.register(config_cls, loader, exist_ok=True)


def register_auto_classes() -> None:
    """Register the structattn config types of :data:`BASE_MODEL_TYPES` in ``AutoConfig`` and their loaders in
    the Auto model classes (idempotent)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for family in BASE_MODEL_TYPES:
        register_models(config_class_for(CONFIG_MAPPING[family]))


class AttachedLoader:
    """What ``AutoModel*`` maps a structattn config class to: it loads the family's own class for that Auto
    class (``BertModel`` for ``AutoModel``, ``BertForTokenClassification`` for
    ``AutoModelForTokenClassification``, ...) and attaches the saved plan; it is never instantiated."""

    config_class: type
    auto_class: type

    @classmethod
    def family_class(cls) -> type:
        """The transformers class this loader builds."""
        return cls.auto_class._model_mapping[cls.config_class.base_config_class]

    @classmethod
    def from_pretrained(cls, path: Any, *args: Any, config: Any = None, **kwargs: Any) -> nn.Module:
        """``AutoModel*.from_pretrained(path)`` of an attached folder (see :func:`structattn.hf.loading.load_attached`)."""
        from structattn.hf.loading import load_attached

        return load_attached(cls.family_class(), path, *args, config=config, **kwargs)

    @classmethod
    def _from_config(cls, config: Any, **kwargs: Any) -> nn.Module:
        """``AutoModel*.from_config(config)`` of an attached config: a freshly initialised model, attached."""
        from structattn.hf.loading import attach_saved

        plain, saved = split_config(config)
        model = cls.family_class()._from_config(plain, **kwargs)
        return attach_saved(model, saved) if saved else model


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Import hook: once transformers' ``configuration_auto`` is imported and no module of transformers is
    half-imported any more (a family config read earlier can meet a partially initialised ``modeling_auto`` or
    its own module), register structattn's types, then leave ``sys.meta_path``. It watches every
    ``transformers`` module imported meanwhile, to know when the outermost of them has finished."""

    def __init__(self) -> None:
        self.running: set[str] = set()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".")[0] != "transformers":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            self.running.add(fullname)
            try:
                run(module)
            finally:
                self.running.discard(fullname)
            if not self.running and _TRIGGER in sys.modules and self in sys.meta_path:
                sys.meta_path.remove(self)
                _register_or_warn()

        spec.loader.exec_module = exec_module
        return spec


def _register_or_warn() -> None:
    """Register inside an import of transformers: a failure must not break that import, so it is a warning
    (folders saved attached then fail to load, naming their unknown ``structattn_*`` model type)."""
    try:
        register_auto_classes()
    except Exception as error:  # noqa: BLE001  (reported, never swallowed silently)
        warnings.warn(f"structattn.hf could not register its Auto classes ({type(error).__name__}: {error}); "
                      "call structattn.hf.register_auto_classes() to see why", RuntimeWarning, stacklevel=2)


def install() -> None:
    """Register the structattn types now when transformers' Auto classes are imported, else right after they
    are (called by ``import structattn.hf``)."""
    if _TRIGGER in sys.modules:  # imported before structattn.hf (a half-imported one cannot be: see the hook)
        register_auto_classes()
    elif not any(isinstance(f, _RegisterAfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())
