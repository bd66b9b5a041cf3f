"""The built-in structure providers. Importing this module registers them; the registry
(``structattn.structures.providers.base.PROVIDERS``) imports it before its first lookup, so
``get_provider("dependency")`` and ``provider_names()`` work without importing any provider module.

A new built-in provider is one file with one ``@register_provider`` decorator, plus one line here.
"""

from structattn.structures.providers import coreference, dependency, semantic, union, window  # noqa: F401
