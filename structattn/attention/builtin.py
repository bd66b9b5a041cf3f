"""The built-in attention variants. Importing this module registers them; the registry
(``structattn.attention.base.ATTENTION``) imports it before its first lookup, so
``get_attention("soft_bias", ...)`` and ``attention_names()`` work without importing any variant module.

A new built-in variant is one file with one ``@register_attention`` decorator, plus one line here.
"""

from structattn.attention import fixed_decay, full, hard_mask, local_global, soft_bias, ssan  # noqa: F401
