"""``union``: hops in the union of other providers' graphs."""

from __future__ import annotations

from typing import Any, Sequence, Union

from structattn.structures.providers.base import (
    GraphProvider,
    Item,
    StructureProvider,
    get_provider,
    register_provider,
)

ProviderSpec = Union[str, StructureProvider, tuple[str, dict]]


def _build(spec: ProviderSpec) -> GraphProvider:
    if isinstance(spec, str):
        provider = get_provider(spec)
    elif isinstance(spec, tuple):
        provider = get_provider(spec[0], **spec[1])
    else:
        provider = spec
    if not isinstance(provider, GraphProvider):
        raise ValueError(
            f"union: provider {getattr(provider, 'name', provider)!r} has no edge list (only graph providers can be "
            "combined; a window is position-based)"
        )
    return provider


@register_provider("union")
class UnionProvider(GraphProvider):
    """Unions the edges of several graph providers and recomputes hops on the union graph.

    Example: dependency trees of each sentence plus coreference links across sentences of a document::

        get_provider("union", providers=["dependency", "coreference"])

    Args:
        providers: names, ``(name, options)`` pairs or provider instances; at least one.
    """

    symmetric = True  # union of undirected graphs: distance[i, j] == distance[j, i]

    def __init__(self, providers: Sequence[ProviderSpec] = ("dependency", "coreference")) -> None:
        if not providers:
            raise ValueError("union: needs at least one provider")
        self.parts = [_build(p) for p in providers]

    @property
    def requires(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(dict.fromkeys(a for p in self.parts for a in p.requires))

    def options(self) -> dict[str, Any]:
        return {"providers": [(p.name, p.options()) for p in self.parts]}

    def graph_edges(self, item: Item) -> list[tuple[int, int]]:
        return [e for p in self.parts for e in p.graph_edges(item)]
