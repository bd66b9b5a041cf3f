"""``BandAttention`` with the global keys and global rows inside it (end slabs zero-padded per slab, key
chunks of the global rows' backward, unused global slots) against a float64 per-query oracle."""

from __future__ import annotations

import pytest
import torch

from structattn.attention import get_attention
from structattn.attention import local_global_kernels as lgk
from structattn.structures import Sentence, Structure, get_provider


def naive_local_global(q, k, v, token_mask, is_global, radius, dilation):
    """Per query: softmax over the keys j with both real and (|i - j| <= r dil, dil | i - j, or i or j
    global); padded queries give zeros. float64, plain loops."""
    b, h, n, d = q.shape
    rows = []
    for bi in range(b):
        for i in range(n):
            keys = [j for j in range(n) if token_mask[bi, i] and token_mask[bi, j] and (
                (abs(i - j) <= radius * dilation and (i - j) % dilation == 0) or is_global[bi, i] or is_global[bi, j])]
            rows.append((bi, i, keys))
    parts = []
    for bi, i, keys in rows:
        if not keys:
            parts.append(torch.zeros(h, d, dtype=torch.float64))
            continue
        scores = torch.einsum("hd,hjd->hj", q[bi, :, i].double(), k[bi, :, keys].double()) / d**0.5
        parts.append(torch.einsum("hj,hjd->hd", torch.softmax(scores, -1), v[bi, :, keys].double()))
    return torch.stack(parts).view(b, n, h, d).transpose(1, 2)


def structure(lengths, radius, dilation, globals_per_row) -> Structure:
    sentences = [Sentence(words=["w"] * n, id=f"s{k}") for k, n in enumerate(lengths)]
    base = get_provider("window", radius=radius, dilation=dilation).batch(sentences)
    flags = torch.zeros_like(base.token_mask)
    for row, positions in enumerate(globals_per_row):
        flags[row, positions] = True
    return Structure(token_mask=base.token_mask, window_radius=radius, dilation=dilation, is_global=flags,
                     source="window")


@pytest.mark.parametrize("slab", [None, 50])  # 50: many slabs, both end slabs padded, small key chunks
@pytest.mark.parametrize("dilation", [1, 2])
def test_fused_path_with_global_rows_matches_the_oracle(slab, dilation, monkeypatch):
    if slab is not None:
        monkeypatch.setattr(lgk, "SLAB_ELEMENTS", slab)
    st = structure([37, 23], 4, dilation, [[0, 36], [5]])  # unequal counts: row 1 has an unused slot
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 3, 37, 5, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    module = get_attention("local_global", num_heads=3, head_dim=5, backend="chunked", block_size=6)
    out = module(q, k, v, st)
    want = naive_local_global(q, k, v, st.token_mask, st.is_global, 4, dilation)
    torch.testing.assert_close(out, want, atol=1e-10, rtol=1e-8)
    probe = torch.randn(out.shape, generator=g, dtype=torch.float64)
    for got, ref in zip(torch.autograd.grad(out, (q, k, v), probe), torch.autograd.grad(want, (q, k, v), probe)):
        torch.testing.assert_close(got, ref, atol=1e-10, rtol=1e-8)


def test_global_query_rows_get_no_band_gradient():
    """A global query's output depends on every real key, through its global row only: the gradient of
    that row alone reaches a key outside its band (the band path alone would give zero there)."""
    st = structure([30], 2, 1, [[3]])
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 30, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    module = get_attention("local_global", num_heads=2, head_dim=4, backend="chunked")
    out = module(q, k, v, st)
    (dk,) = torch.autograd.grad(out[:, :, 3].sum(), (k,))
    want = naive_local_global(q, k, v, st.token_mask, st.is_global, 2, 1)
    (ref,) = torch.autograd.grad(want[:, :, 3].sum(), (k,))
    torch.testing.assert_close(dk, ref, atol=1e-10, rtol=1e-8)
    assert dk[0, :, 20].abs().sum() > 0
