"""Dropout whose mask costs half as much on half-precision activations (bf16 training on CPU)."""

from __future__ import annotations

import torch
from torch import nn

HALF_TYPES = (torch.float16, torch.bfloat16)


class Dropout(nn.Dropout):
    """``nn.Dropout`` (Srivastava et al., 2014: zero each element with probability ``p``, scale the rest by
    ``1 / (1 - p)``) with a cheaper mask for float16/bfloat16 inputs.

    torch's CPU dropout draws its mask with ``bernoulli_``, which took ~20% of a bf16 training step of the
    Multi30k-size model (``benchmarks/profile_step.py``); for half inputs this layer keeps an element where a
    float32 uniform draw is ``>= p`` instead: the same distribution (to float32's 2**-24 resolution of ``p``),
    about 2x faster forward + backward. Float32 and float64 inputs take ``nn.Dropout``'s own path unchanged,
    so fp32 runs draw exactly the random numbers they drew before. A drop-in replacement: same arguments, no
    parameters, the same ``state_dict``.

    Shapes:
        x: any -> same.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p in (0.0, 1.0) or x.dtype not in HALF_TYPES:
            return super().forward(x)
        scale = torch.rand(x.shape, device=x.device) >= self.p  # (x.shape) True: kept
        scale = scale.to(x.dtype).mul_(1.0 / (1.0 - self.p))
        if self.inplace:
            return x.mul_(scale)
        return x * scale
