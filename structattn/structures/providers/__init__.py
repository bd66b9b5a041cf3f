"""Built-in structure providers; importing this package registers them."""

from structattn.structures.providers import dependency, window  # noqa: F401  (registration)
from structattn.structures.providers.base import (
    PROVIDERS,
    GraphProvider,
    StructureProvider,
    get_provider,
    provider_names,
    register_provider,
)

__all__ = ["PROVIDERS", "GraphProvider", "StructureProvider", "get_provider", "provider_names", "register_provider"]
