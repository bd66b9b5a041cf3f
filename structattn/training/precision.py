"""Which floating-point precision a run trains in: ``training.precision = 'auto' | 'bf16' | 'fp32'``.

``'auto'`` resolves, once per run, to ``'bf16'`` where the device computes bfloat16 natively and to ``'fp32'``
elsewhere:

- CPU: bf16 when the processor has AMX-BF16 tiles or the AVX512-BF16 dot-product instructions (what oneDNN's
  bf16 matrix products run on; ``lscpu`` lists them as ``amx_bf16`` and ``avx512_bf16``). Without them a bf16
  product is emulated and no faster than fp32, so ``'auto'`` keeps fp32;
- CUDA: bf16 when ``torch.cuda.is_bf16_supported()`` (Ampere and later);
- anything else: fp32.

The precision a run *used* (never ``'auto'``) is what its checkpoint and its record store, and what the
comparison tables check: runs of one comparison that trained in different precisions are refused there (see
:func:`check_one_precision`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

#: values of ``training.precision``
PRECISIONS = ("fp32", "bf16", "auto")


def native_bf16(device: torch.device | str = "cpu") -> bool:
    """Whether ``device`` computes bfloat16 matrix products natively (see the module docstring)."""
    kind = torch.device(device).type
    if kind == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if kind == "cpu":
        cpu = getattr(torch, "cpu", None)
        checks = [getattr(cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
        return any(bool(check()) for check in checks if callable(check))
    return False


def resolve_precision(precision: str, device: torch.device | str = "cpu") -> str:
    """``'fp32'`` or ``'bf16'``: ``precision`` itself, or what ``'auto'`` means on ``device``.

    Raises:
        ValueError: ``precision`` is not one of :data:`PRECISIONS`.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"training precision must be one of {list(PRECISIONS)}, got {precision!r}")
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device) else "fp32"


def record_precision(record: dict[str, Any]) -> str:
    """The precision a run record trained in (records written before precision was recorded: ``'fp32'``, which
    was then the only precision that ran)."""
    return str(record.get("precision", "fp32"))


def check_one_precision(records: Iterable[dict[str, Any]]) -> str | None:
    """The one precision of ``records`` (``None`` when there are none).

    Raises:
        ValueError: runs trained in different precisions, listed by run id: their differences would mix
            rounding with the effect of the settings.
    """
    by_precision: dict[str, list[str]] = {}
    for record in records:
        by_precision.setdefault(record_precision(record), []).append(str(record.get("run_id", record.get("index"))))
    if len(by_precision) > 1:
        listed = "; ".join(f"{p}: {', '.join(ids[:4])}{' ...' if len(ids) > 4 else ''} ({len(ids)} runs)"
                           for p, ids in sorted(by_precision.items()))
        raise ValueError(f"these runs trained in different precisions ({listed}); a comparison table needs one "
                         "precision: rerun the odd ones with the same training.precision into their own folder, "
                         "or compare them in separate tables")
    return next(iter(by_precision), None)
