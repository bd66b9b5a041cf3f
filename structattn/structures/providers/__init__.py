"""Built-in structure providers; importing this package registers them."""

from structattn.structures.providers import (  # noqa: F401  (importing registers the built-ins)
    coreference,
    dependency,
    semantic,
    union,
    window,
)
from structattn.structures.providers.base import (
    PROVIDERS,
    GraphProvider,
    StructureProvider,
    get_provider,
    provider_names,
    register_provider,
)

__all__ = ["PROVIDERS", "GraphProvider", "StructureProvider", "get_provider", "provider_names", "register_provider"]
