"""structattn: linguistic-structure priors for self-attention.

Stages (dependencies flow one way): ``structures`` -> ``attention`` -> ``encoders`` -> ``probes``.

The commands as functions (:mod:`structattn.api`, imported on first use so that ``import structattn`` stays
light): ``structattn.compare``, ``structattn.train``, ``structattn.probe``.
"""

from structattn._lazy import lazy_names

__version__ = "0.1.0"

_NAMES = {"compare": "api", "train": "api", "probe": "api"}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, _NAMES)
