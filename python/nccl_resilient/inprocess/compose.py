"""``Compose``: one callable out of several, as functions compose (the last
argument runs first, its result is the next one's input; a None result
passes the input on). The result is an instance of the arguments' common
base class among the hook and policy classes, so ``Compose(Abort, Abort)``
is an ``Abort`` and can be given wherever one is expected."""

from __future__ import annotations

from typing import Any, Callable


def _common_base(callables) -> type:
    """The most derived class that every argument is an instance of, other
    than object (object when they share none)."""
    candidates = [c for c in type(callables[0]).__mro__ if c is not object]
    for c in candidates:
        if all(isinstance(x, c) for x in callables):
            return c
    return object


class Compose:
    """``Compose(f, g, h)(x)`` is ``f(g(h(x)))``."""

    def __new__(cls, *callables: Callable[..., Any]):
        if cls is not Compose:  # a class made below: construct as usual
            return super().__new__(cls)
        if not callables:
            raise TypeError("Compose needs at least one callable")
        for c in callables:
            if not callable(c):
                raise TypeError(f"Compose: {c!r} is not callable")
        base = _common_base(callables)
        kind = Compose
        if base is not object and not issubclass(base, Compose):
            try:
                kind = _composed_class(base)
            except TypeError:  # a base that cannot be subclassed (a function's type)
                kind = Compose
        return object.__new__(kind)

    def __init__(self, *callables: Callable[..., Any]) -> None:
        self.instances = list(callables)

    def __call__(self, value: Any) -> Any:
        for c in reversed(self.instances):
            out = c(value)
            if out is not None:
                value = out
        return value

    def flatten(self) -> list:
        """The callables in order, nested Compose objects expanded."""
        out = []
        for c in self.instances:
            out.extend(c.flatten() if isinstance(c, Compose) else [c])
        return out

    def __repr__(self) -> str:
        return f"Compose({', '.join(repr(c) for c in self.instances)})"


_classes: dict = {}


def _composed_class(base: type) -> type:
    """Compose as a subclass of ``base`` too (abstract methods are Compose's)."""
    if base not in _classes:
        namespace = {"__call__": Compose.__call__, "__init__": Compose.__init__,
                     "__repr__": Compose.__repr__, "__module__": __name__}
        _classes[base] = type(f"Compose[{base.__name__}]", (Compose, base), namespace)
    return _classes[base]


__all__ = ["Compose"]
