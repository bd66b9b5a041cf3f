"""A small name -> class registry shared by providers and attention variants."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps registry keys to classes; unknown names fail with the list of known ones.

    Args:
        kind: what the registry holds, used in error messages (e.g. ``"structure provider"``).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator adding the class under ``name``; the class gets ``.name = name``."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")

        def add(cls: type[T]) -> type[T]:
            existing = self._entries.get(name)
            if existing is not None and existing is not cls:
                raise ValueError(
                    f"{self.kind} {name!r} is already registered to {existing.__module__}.{existing.__qualname__}"
                )
            self._entries[name] = cls
            cls.name = name  # type: ignore[attr-defined]
            return cls

        return add

    def unregister(self, name: str) -> type[T]:
        """Remove ``name`` (tests and plugins that registered a temporary entry); returns its class."""
        try:
            return self._entries.pop(name)
        except KeyError:
            raise ValueError(f"cannot unregister {self.kind} {name!r}: it is not registered") from None

    def get(self, name: str) -> type[T]:
        """The class registered under ``name``."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "(none)"
            raise ValueError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries
