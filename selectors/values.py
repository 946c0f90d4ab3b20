"""How the project declares a value object built on a hot path (a protocol message, a
resource descriptor, a barrier record): :data:`value`."""
from __future__ import annotations

from dataclasses import dataclass

#: A slotted dataclass (no per-instance ``__dict__``), compared and hashed by its fields as
#: a frozen one is, but built by plain assignments: a frozen dataclass sets each field
#: through ``object.__setattr__``, about four times the cost, and a replay builds dozens
#: per job. Immutable by convention: nothing assigns to a value after building it.
value = dataclass(slots=True, unsafe_hash=True)
