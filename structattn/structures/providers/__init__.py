"""Structure providers: the registry and base classes (the built-in providers register on first lookup,
see :mod:`structattn.structures.providers.builtin`)."""

from structattn.structures.providers.base import (
    PROVIDERS,
    GraphProvider,
    StructureProvider,
    get_provider,
    provider_names,
    register_provider,
)

__all__ = ["PROVIDERS", "GraphProvider", "StructureProvider", "get_provider", "provider_names", "register_provider"]
