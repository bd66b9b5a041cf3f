"""The one name -> class registry of the package: attention variants, structure providers, tasks, parsers,
probe steps and kinds of run all register and are looked up the same way.

``Registry(kind, builtin="package.module")`` imports ``builtin`` (the module whose import registers the
built-in entries) before the first lookup or registration, so no import-time side effect hides in a
package's ``__init__`` and a plugin that reuses a built-in name is refused when it registers, naming both.
Unknown names and bad options raise one kind of ``ValueError``, naming the registry's kind::

    ATTENTION = Registry("attention variant", builtin="structattn.attention.builtin")

    @ATTENTION.register("my_variant")
    class MyVariant(StructuredAttention): ...

    ATTENTION.build("my_variant", num_heads=4, head_dim=8)   # unknown option -> ValueError naming it
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps registry keys to classes; unknown names fail with the list of known ones.

    Args:
        kind: what the registry holds, used in error messages (e.g. ``"structure provider"``).
        builtin: a module whose import registers the built-in entries, imported once before the first
            lookup or registration (``None``: entries register when their modules are imported).
    """

    def __init__(self, kind: str, builtin: str | None = None) -> None:
        self.kind = kind
        self.builtin = builtin
        self._entries: dict[str, type[T]] = {}
        self._loaded = builtin is None

    def _load_builtin(self) -> None:
        if not self._loaded:
            self._loaded = True  # set first: the built-in module registers through this registry
            try:
                importlib.import_module(self.builtin)  # type: ignore[arg-type]
            except BaseException:
                self._loaded = False
                raise

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator adding the class under ``name``; the class gets ``.name = name``.

        Raises:
            ValueError: ``name`` is empty, or already registered to another class (built-ins included).
        """
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")

        def add(cls: type[T]) -> type[T]:
            if not self._is_builtin(cls):
                self._load_builtin()  # so that a plugin reusing a built-in name is refused now, naming both
            existing = self._entries.get(name)
            if existing is not None and existing is not cls:
                raise ValueError(
                    f"{self.kind} {name!r} is already registered to {existing.__module__}.{existing.__qualname__}; "
                    f"{cls.__module__}.{cls.__qualname__} cannot take the name"
                )
            self._entries[name] = cls
            cls.name = name  # type: ignore[attr-defined]
            return cls

        return add

    def _is_builtin(self, cls: type) -> bool:
        """Whether ``cls`` comes from the built-in module's package (it registers while that loads)."""
        package = (self.builtin or "").rpartition(".")[0]
        return bool(package) and (cls.__module__ + ".").startswith(package + ".")

    def unregister(self, name: str) -> type[T]:
        """Remove ``name`` (tests and plugins that registered a temporary entry); returns its class."""
        try:
            return self._entries.pop(name)
        except KeyError:
            raise ValueError(f"cannot unregister {self.kind} {name!r}: it is not registered") from None

    def get(self, name: str) -> type[T]:
        """The class registered under ``name``."""
        self._load_builtin()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            known = ", ".join(sorted(self._entries)) or "(none)"
            raise ValueError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def build(self, name: str, *args: Any, **options: Any) -> T:
        """An instance of the class registered as ``name``, built with ``options``.

        Raises:
            ValueError: an unknown name, or options the constructor does not take (naming the kind, the name
                and the constructor's signature); errors the constructor itself raises pass through.
        """
        cls = self.get(name)
        try:
            inspect.signature(cls).bind(*args, **options)
            return cls(*args, **options)  # type: ignore[return-value]
        except TypeError as err:
            if "argument" not in str(err):  # not a call that the options failed to bind: the constructor's own
                raise
            raise ValueError(f"{self.kind} {name!r}: bad options {options}: {err}; it takes "
                             f"{_signature(cls)}") from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        self._load_builtin()
        return sorted(self._entries)

    def items(self) -> Iterator[tuple[str, type[T]]]:
        """``(name, class)`` pairs, sorted by name."""
        self._load_builtin()
        return iter(sorted(self._entries.items()))

    def __contains__(self, name: object) -> bool:
        self._load_builtin()
        return name in self._entries


def _signature(cls: type) -> str:
    try:
        return str(inspect.signature(cls))
    except (TypeError, ValueError):
        return "(see its docstring)"
