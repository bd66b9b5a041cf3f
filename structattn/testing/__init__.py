"""The contract kit: the checks structattn's own suites run, for your attention variants and providers.

    from structattn.testing import check_attention, check_provider

    check_attention("gaussian_bias", my_float64_reference)
    check_provider("chain", lambda sentence: my_distance_matrix(sentence))

Each raises ``AssertionError`` naming the failed check and by how much. The individual checks
(:data:`ATTENTION_CHECKS`, :data:`PROVIDER_CHECKS`) can be parametrised in pytest for readable output; a
check that does not apply raises :class:`Skipped` with the reason.
"""

from structattn.testing._checks import Skipped
from structattn.testing.attention import ATTENTION_CHECKS, AttentionCase, check_attention
from structattn.testing.inputs import dependency_structure, fill_padding, pad_structure, random_heads, random_qkv
from structattn.testing.provider import PROVIDER_CHECKS, ProviderCase, check_provider

__all__ = [
    "ATTENTION_CHECKS", "AttentionCase", "PROVIDER_CHECKS", "ProviderCase", "Skipped", "check_attention",
    "check_provider", "dependency_structure", "fill_padding", "pad_structure", "random_heads", "random_qkv",
]
