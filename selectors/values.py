"""How the project declares a value object built on a hot path (a protocol message, a
resource descriptor, a barrier record): :data:`value`."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # the marker is for type checkers only: at run time it changes nothing
    def dataclass_transform(**_: Any) -> Any:
        return lambda decorator: decorator

_T = TypeVar("_T")


@dataclass_transform(eq_default=True, field_specifiers=(field,))
def value(cls: type[_T]) -> type[_T]:
    """A slotted dataclass (no per-instance ``__dict__``), compared and hashed by its fields
    as a frozen one is, but built by plain assignments: a frozen dataclass sets each field
    through ``object.__setattr__``, about four times the cost, and a replay builds dozens
    per job. Immutable by convention: nothing assigns to a value after building it.

    A decorator function rather than the bare ``dataclass(...)`` it calls, so that type
    checkers (``dataclass_transform``) see each value's fields and ``__init__``."""
    return dataclass(slots=True, unsafe_hash=True)(cls)


class WrittenValue:
    """A value written out by hand, for a field it makes only when first read (a property
    over a slot): compared, hashed and shown by the fields named in ``FIELDS``, in order,
    as a :data:`value` is by its own."""

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple([getattr(self, name) for name in self.FIELDS])

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if type(other) is type(self) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({shown})"
