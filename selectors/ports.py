"""Port ranges: sorted, disjoint, closed ``[begin, end]`` intervals (qizhi's ValueRange).

A :class:`PortRanges` value is immutable and always coalesced: overlapping AND
adjacent ranges are merged, so ``[1,3] + [4,6]`` is ``[1,6]``. Set algebra
(union, intersection, difference, subset) is defined on the ports the ranges
cover, which is what the property tests check.
"""
from __future__ import annotations

import random
from dataclasses import field
from typing import Iterable, Iterator, Sequence

from .values import value

PORT_MIN = 0
PORT_MAX = 65535


class PortError(ValueError):
    """A port range that is not a closed interval of valid ports, or a request for
    more ports than a range set holds."""


def coalesce(ranges: Iterable[Sequence[int]]) -> tuple[tuple[int, int], ...]:
    """Sort and merge overlapping or adjacent ``(begin, end)`` pairs."""
    items = []
    for pair in ranges:
        begin, end = int(pair[0]), int(pair[1])
        if begin > end:
            raise PortError(f"port range [{begin}, {end}]: begin is greater than end")
        if begin < PORT_MIN or end > PORT_MAX:
            raise PortError(f"port range [{begin}, {end}]: ports must be within {PORT_MIN}..{PORT_MAX}")
        items.append((begin, end))
    items.sort()
    return _merge_sorted(items)


def _merge_sorted(items: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Merge sorted, valid ``(begin, end)`` pairs that overlap or touch."""
    if not items:
        return ()
    merged: list[tuple[int, int]] = []
    begin, end = items[0]
    for b, e in items:
        if b <= end + 1:
            if e > end:
                end = e
        else:
            merged.append((begin, end))
            begin, end = b, e
    merged.append((begin, end))
    return tuple(merged)


@value
class PortRanges:
    """An immutable set of ports stored as coalesced closed ranges: a value, slotted,
    compared and hashed by its ranges, never changed once built — by convention, not by
    ``frozen``, whose ``__init__`` sets each field through ``object.__setattr__``."""

    ranges: tuple[tuple[int, int], ...] = ()
    #: How many ports the ranges hold, counted once when the value is made: the ledger and
    #: the view read it at every booking (a gang's start books thousands).
    count: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        count = len(self.ranges)
        for begin, end in self.ranges:
            count += end - begin
        self.count = count

    @classmethod
    def of(cls, *ranges: Sequence[int]) -> "PortRanges":
        return cls(coalesce(ranges))

    @classmethod
    def from_ports(cls, ports: Iterable[int]) -> "PortRanges":
        return cls(coalesce((p, p) for p in ports))

    @classmethod
    def parse(cls, text: str) -> "PortRanges":
        """``"8000-8100,9000"`` → ranges. Used by the CLI and cluster files."""
        pairs = []
        for part in str(text).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                if "-" in part:
                    begin, end = part.split("-", 1)
                    pairs.append((int(begin), int(end)))
                else:
                    pairs.append((int(part), int(part)))
            except ValueError:
                raise PortError(f"expected ports like '8000-8100,9000', got {text!r}") from None
        return cls(coalesce(pairs))

    def __str__(self) -> str:
        return ",".join(f"{b}" if b == e else f"{b}-{e}" for b, e in self.ranges) or "none"

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __iter__(self) -> Iterator[int]:
        for begin, end in self.ranges:
            yield from range(begin, end + 1)

    def add(self, other: "PortRanges") -> "PortRanges":
        if not other.ranges:
            return self
        if not self.ranges:
            return other
        return PortRanges(_merge_sorted(sorted(self.ranges + other.ranges)))   # both valid already

    def intersect(self, other: "PortRanges") -> "PortRanges":
        if len(other.ranges) == 1 and self.ranges and other.ranges[0][0] <= self.ranges[0][0] \
                and self.ranges[-1][1] <= other.ranges[0][1]:
            return self   # all of it lies in the one range of ``other`` (a node's free ports in its capacity)
        out = []
        i = j = 0
        a, b = self.ranges, other.ranges
        while i < len(a) and j < len(b):
            begin = max(a[i][0], b[j][0])
            end = min(a[i][1], b[j][1])
            if begin <= end:
                out.append((begin, end))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return PortRanges(tuple(out))

    def subtract(self, other: "PortRanges") -> "PortRanges":
        out = []
        j = 0
        b = other.ranges
        for begin, end in self.ranges:
            cursor = begin
            while j < len(b) and b[j][1] < cursor:
                j += 1
            k = j
            while k < len(b) and b[k][0] <= end:
                if b[k][0] > cursor:
                    out.append((cursor, b[k][0] - 1))
                cursor = max(cursor, b[k][1] + 1)
                if cursor > end:
                    break
                k += 1
            if cursor <= end:
                out.append((cursor, end))
        return PortRanges(tuple(out))

    def fits_in(self, other: "PortRanges") -> bool:
        """True when every port here is also in ``other``."""
        return not self.subtract(other)

    def count_at_or_above(self, minimum: int) -> int:
        """How many ports are ``>= minimum`` (``above(minimum).count``, without building it)."""
        return sum(end - max(begin, minimum) + 1 for begin, end in self.ranges if end >= minimum)

    def above(self, minimum: int) -> "PortRanges":
        """The ports ``>= minimum``."""
        return self.intersect(PortRanges(((max(minimum, PORT_MIN), PORT_MAX),)))

    def take_sequential(self, count: int, minimum: int = PORT_MIN) -> "PortRanges":
        """The ``count`` lowest ports ``>= minimum``."""
        pool = self.above(minimum)
        if count > pool.count:
            raise PortError(f"need {count} port(s) >= {minimum}, only {pool.count} free ({pool})")
        taken = []
        for begin, end in pool.ranges:
            if count <= 0:
                break
            stop = min(end, begin + count - 1)
            taken.append((begin, stop))
            count -= stop - begin + 1
        return PortRanges(tuple(taken))

    def take_random(self, count: int, rng: random.Random, minimum: int = PORT_MIN) -> "PortRanges":
        """``count`` distinct ports ``>= minimum`` drawn uniformly with ``rng``."""
        pool = self.above(minimum)
        total = pool.count
        if count > total:
            raise PortError(f"need {count} port(s) >= {minimum}, only {total} free ({pool})")
        offsets = sorted(rng.sample(range(total), count))
        ports = []
        base = 0
        it = iter(pool.ranges)
        begin, end = next(it, (0, -1))
        for offset in offsets:
            while offset >= base + (end - begin + 1):
                base += end - begin + 1
                begin, end = next(it)
            ports.append(begin + offset - base)
        return PortRanges.from_ports(ports)


NO_PORTS = PortRanges()
