"""structattn: linguistic-structure priors for self-attention.

Stages (dependencies flow one way): ``structures`` -> ``attention`` -> ``encoders`` -> ``probes``.
"""

__version__ = "0.1.0"
