"""The built-in kinds of run. Importing this module registers them; the registry
(:data:`structattn.experiments.runners.base.RUNNERS`) imports it before its first lookup.

A new built-in kind is one file with one ``@register_runner`` decorator, plus one line here; a plugin's kind
registers when the plugin is imported (``--import``), with no line anywhere.
"""

from structattn.experiments.runners import encoder, hf, hf_seq2seq, seq2seq  # noqa: F401  (registration)
