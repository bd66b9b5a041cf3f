"""Label-smoothed cross-entropy over a large vocabulary, computed in row chunks that stay in the CPU's cache.

``F.cross_entropy(logits.float(), target, label_smoothing=eps)`` on a bf16 step makes about ten full passes over
the (rows, V) logits in float32 (the cast, log-softmax, the two loss terms, their gradients and their sum, the
log-softmax backward, the cast back): at the Multi30k size (1,900 rows x 8,000 classes, 61 MB) each pass streams
from memory, and together they were a fifth of the step (docs/benchmarks.md). Here each chunk of rows is cast,
reduced and differentiated while it is in cache, and the backward recomputes the softmax from the saved
(bf16) logits and the per-row log-sum-exp instead of keeping a float32 copy.

The function is the one ``torch.nn.functional.cross_entropy`` computes (Szegedy et al., 2016, as torch defines
it): for row i with target y_i and logits z_i over V classes,

    loss_i = lse(z_i) - (1 - eps) * z_i[y_i] - (eps / V) * sum_c z_ic,

and the result is the mean over rows whose target is not ``ignore_index`` (nan when there is none, as torch).
The gradient is (softmax(z_i) - (1 - eps) * onehot(y_i) - eps / V) divided by the number of kept rows (zero on
ignored rows). Sums run in float32 whatever the
logits' dtype, so the result differs from torch's only by float32 rounding.
"""

from __future__ import annotations

import torch

#: rows per chunk: 64 rows x 8,000 classes in float32 is 2 MB, within one core's L2 (32 to 256 rows timed alike).
CHUNK_ROWS = 64


class _ChunkedSmoothedCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, eps: float, ignore_index: int,
                chunk_rows: int) -> torch.Tensor:
        # logits (r, V) any float dtype; target (r,) int64
        valid = target != ignore_index
        count = valid.sum()
        safe_target = torch.where(valid, target, 0)
        lse = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        vocab = logits.shape[1]
        for start in range(0, logits.shape[0], chunk_rows):
            rows = slice(start, start + chunk_rows)
            z = logits[rows].float()  # (c, V)
            lse[rows] = torch.logsumexp(z, dim=-1)
            picked = z.gather(1, safe_target[rows, None]).squeeze(1)
            per_row = lse[rows] - (1.0 - eps) * picked - (eps / vocab) * z.sum(dim=-1)
            total += torch.where(valid[rows], per_row, 0.0).sum()
        ctx.save_for_backward(logits, safe_target, valid, lse, count)
        ctx.eps, ctx.chunk_rows = eps, chunk_rows
        return total / count

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        logits, safe_target, valid, lse, count = ctx.saved_tensors
        eps, vocab = ctx.eps, logits.shape[1]
        grad = torch.empty_like(logits)
        row_scale = valid.float() * (grad_output.float() / count)  # (r,): 0 on ignored rows
        for start in range(0, logits.shape[0], ctx.chunk_rows):
            rows = slice(start, start + ctx.chunk_rows)
            p = logits[rows].float().sub_(lse[rows, None]).exp_().sub_(eps / vocab)  # (c, V)
            p.scatter_add_(1, safe_target[rows, None], p.new_full((p.shape[0], 1), -(1.0 - eps)))
            grad[rows] = p.mul_(row_scale[rows, None])
        return grad, None, None, None, None


def chunked_cross_entropy(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0,
                          ignore_index: int = 0, chunk_rows: int = CHUNK_ROWS) -> torch.Tensor:
    """Mean label-smoothed cross-entropy of ``logits`` against ``target``, as ``F.cross_entropy`` with
    ``ignore_index`` and ``label_smoothing`` (module docstring), in float32, chunked over rows.

    Shapes:
        logits (r, V) float (bf16 stays bf16 in memory; each chunk is summed in float32), target (r,) int64 ->
        a float32 scalar; the gradient has the logits' dtype.
    """
    if logits.dim() != 2 or target.shape != logits.shape[:1]:
        raise ValueError(f"logits must be (rows, V) and target (rows,), got {tuple(logits.shape)} and "
                         f"{tuple(target.shape)}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    with torch.autocast(logits.device.type, enabled=False):
        return _ChunkedSmoothedCE.apply(logits, target, float(label_smoothing), int(ignore_index), int(chunk_rows))
