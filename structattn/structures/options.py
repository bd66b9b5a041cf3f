"""Options derived from constructor arguments, for everything whose ``options()`` names it in a key.

Providers (cache keys) and tasks (run ids, checkpoints) are identified by ``options()``. A subclass that takes
constructor arguments but forgets to list them would share keys with another configuration (a provider
built with ``max_hops=1`` served for ``max_hops=5``). :class:`DerivedOptions` closes that gap:

* every ``__init__`` of a subclass is wrapped so that the bound arguments (defaults applied, ``**kwargs``
  flattened, ``*args`` as a list) are recorded on the instance; arguments a subclass forwards to its
  parent's ``__init__`` are recorded with the parent's defaults too;
* the default :meth:`DerivedOptions.options` returns those arguments, so a subclass needs no ``options()``;
* an ``options()`` a subclass writes itself is checked on every call: a constructor argument it leaves out
  raises ``ValueError`` naming the class and the argument, unless the argument is at its default value
  (then no other configuration can share the key: any other value raises; ``options_defaults`` gives the
  defaults of arguments taken through ``**kwargs``) or is listed in ``options_ignored`` (arguments that
  cannot change the output, e.g. a batch size).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, ClassVar

_ARGUMENTS = "_init_arguments"  # instance attribute: name -> value of every constructor argument
_DEFAULTS = "_init_defaults"  # instance attribute: name -> default, for arguments that have one
_BUSY = "_options_busy"  # instance attribute set while an options() override runs (super() calls inside)


class DerivedOptions:
    """Mixin: ``options()`` from the constructor's arguments, and a completeness check of overrides.

    Class attributes:
        options_ignored: constructor arguments that never change the output (left out of options).
        options_defaults: defaults of arguments taken through ``**kwargs`` (which the signature cannot give);
            an override may leave such an argument out while it equals its default here.
    """

    options_ignored: ClassVar[tuple[str, ...]] = ()
    options_defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _recording(cls.__dict__["__init__"])  # type: ignore[method-assign]
        if "options" in cls.__dict__:
            cls.options = _checked(cls.__dict__["options"])  # type: ignore[method-assign]

    def options(self) -> dict[str, Any]:
        """The constructor arguments (defaults applied) minus ``options_ignored``; part of keys and ids."""
        return {k: v for k, v in self.__dict__.get(_ARGUMENTS, {}).items() if k not in self.options_ignored}

    def options_unchecked(self) -> dict[str, Any]:
        """:meth:`options`, or the recorded arguments when an override is incomplete (for ``repr``)."""
        try:
            return self.options()
        except ValueError:
            return DerivedOptions.options(self)


def _recording(init: Callable[..., None]) -> Callable[..., None]:
    signature = inspect.signature(init)
    defaults = {p.name: p.default for p in signature.parameters.values() if p.default is not inspect.Parameter.empty}

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return init(self, *args, **kwargs)  # the constructor raises its own error
        bound.apply_defaults()
        recorded = self.__dict__.setdefault(_ARGUMENTS, {})
        recorded_defaults = self.__dict__.setdefault(_DEFAULTS, {})
        for name, value in _flatten(bound).items():  # outer (subclass) constructors are recorded first and win
            if name not in recorded:
                recorded[name] = value
                if name in defaults:
                    recorded_defaults[name] = defaults[name]
        init(self, *args, **kwargs)

    return __init__


def _flatten(bound: inspect.BoundArguments) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, (name, value) in enumerate(bound.arguments.items()):
        if k == 0:
            continue  # self
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = list(value)
        else:
            out[name] = value
    return out


def _checked(options: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    @functools.wraps(options)
    def checked(self: Any) -> dict[str, Any]:
        if self.__dict__.get(_BUSY):
            return options(self)  # a super().options() call inside an override: checked by the outermost
        self.__dict__[_BUSY] = True
        try:
            out = options(self)
        finally:
            del self.__dict__[_BUSY]
        check_complete(self, out)
        return out

    return checked


def check_complete(obj: Any, options: dict[str, Any]) -> None:
    """Raise ``ValueError`` when ``options`` leaves out a constructor argument of ``obj`` that is set to a
    value other than its default and is not in ``options_ignored``."""
    arguments = obj.__dict__.get(_ARGUMENTS, {})
    defaults = {**getattr(obj, "options_defaults", {}), **obj.__dict__.get(_DEFAULTS, {})}
    ignored = getattr(obj, "options_ignored", ())
    missing = [name for name, value in arguments.items()
               if name not in options and name not in ignored and not _is_default(name, value, defaults)]
    if missing:
        cls = type(obj)
        what = f"{getattr(cls, 'name', cls.__name__)!r} ({cls.__module__}.{cls.__qualname__})"
        values = ", ".join(f"{name}={arguments[name]!r}" for name in missing)
        raise ValueError(
            f"{what}: options() leaves out constructor argument(s) {values}, so its cache key / run id would "
            "not tell this configuration from others; return them from options() (or drop the override: the "
            "default options() lists every constructor argument), or name arguments that cannot change the "
            "output in options_ignored"
        )


def _is_default(name: str, value: Any, defaults: dict[str, Any]) -> bool:
    if name not in defaults:
        return False
    default = defaults[name]
    try:
        return type(value) is type(default) and bool(value == default)
    except Exception:  # noqa: BLE001  (values whose == is not a bool, e.g. tensors: not a default)
        return False
