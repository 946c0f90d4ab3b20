"""The free ports of every node as one column of codes.

A node's free ports are a set of ranges (:class:`~gangmaster.selectors.ports.PortRanges`),
but the nodes of a kind hold the same few sets: their capacity, less the lowest ports
the instances placed there took. :class:`PortColumn` keeps one code per node (an int32
numpy column) into a :class:`PortTable` of the distinct sets, so a gang's booking of
thousands of nodes works out each distinct (free ports, ports taken) pair once and
writes the nodes' new codes with numpy (:meth:`PortColumn.take_many`), and per-node
counts are read through the table as one gather. The table also keeps, per (set, ports
each, instances, ``port_min``), the lowest ports that many instances take
(:meth:`PortTable.sequential`): a placement hands the booking those choices as a
:class:`PortChoice`, whose pairs are not worked out again. Read and written one node at a time,
the column behaves as the list of ``PortRanges`` it replaces.

A copy of the column (a view's scratch copy) shares the table: codes mean the same
sets in both, and the sets a trial placement made stay known. The table only grows; a
column whose table passes :data:`TABLE_KEPT` sets starts its own with the sets it holds
(:meth:`PortColumn.compact`, at a one-node write: never in the middle of a bulk step).
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

import numpy as np

from .ports import PortRanges

__all__ = ["PortTable", "PortColumn", "PortChoice", "TABLE_KEPT", "distinct"]

#: How many distinct sets a table holds before a column writing one node starts its own.
TABLE_KEPT = 1 << 15


class PortTable:
    """Distinct port sets, each with a code (its position): found by value, so a set is
    one code however many objects equal to it were handed in."""

    __slots__ = ("values", "_code_of", "_counts", "_changes", "_above", "_sequential")

    def __init__(self) -> None:
        self.values: list[PortRanges] = []
        self._code_of: dict[PortRanges, int] = {}
        self._counts = np.zeros(16, dtype=np.int64)   # per code, its count (grown by doubling)
        #: (code, change, adding) -> the code of the set less (plus) the change
        self._changes: dict[tuple[int, PortRanges, bool], int] = {}
        #: port_min -> per code, its count of ports >= port_min (the codes made so far)
        self._above: dict[int, np.ndarray] = {}
        #: (code, ports each, instances, port_min) -> :meth:`sequential`'s answer
        self._sequential: dict[tuple[int, int, int, int], tuple[list[PortRanges], int, int]] = {}

    def __len__(self) -> int:
        return len(self.values)

    def code(self, ports: PortRanges) -> int:
        """The code of ``ports``, made the first time the set is seen."""
        code = self._code_of.get(ports)
        if code is None:
            code = self._code_of[ports] = len(self.values)
            self.values.append(ports)
            if code == self._counts.size:
                self._counts = np.concatenate([self._counts, np.zeros(code, dtype=np.int64)])
            self._counts[code] = ports.count
        return code

    def codes(self, ports: Sequence[PortRanges]) -> np.ndarray:
        """The codes of many sets (the nodes of a kind share their objects: each object
        looked up once)."""
        ids = list(map(id, ports))
        known = {key: self.code(p) for key, p in dict(zip(ids, ports)).items()}
        return np.fromiter(map(known.__getitem__, ids), dtype=np.int32, count=len(ids))

    def counts(self) -> np.ndarray:
        """Per code, how many ports its set holds (index with codes; longer than the table)."""
        return self._counts

    def changed(self, code: int, change: PortRanges, adding: bool) -> int:
        """The code of set ``code`` less ``change`` (plus it, ``adding``): the nodes of a kind
        go through the same few changes again and again (the lowest ports taken, then given
        back), each worked out once."""
        key = (code, change, adding)
        result = self._changes.get(key)
        if result is None:
            free = self.values[code]
            result = self._changes[key] = self.code(free.add(change) if adding else free.subtract(change))
        return result

    def sequential(self, code: int, each: int, take: int, port_min: int) -> tuple[list[PortRanges], int, int]:
        """The ports ``take`` instances of ``each`` ports get, one after another, on a node whose
        free ports are set ``code``: the lowest free at or above ``port_min``. Returns each
        instance's, the code of them all (taken), and the code of what is left. Worked out once
        per (set, ports each, instances, port_min) for good: a gang's thousands of nodes hold a
        few sets, and every placement of its shape asks the same again."""
        key = (code, each, take, port_min)
        known = self._sequential.get(key)
        if known is None:
            union = self.values[code].take_sequential(each * take, port_min)
            ports = list(union)
            if len(self._sequential) >= CHOICES_KEPT:
                self._sequential.clear()
            known = self._sequential[key] = ([PortRanges.from_ports(ports[j * each:(j + 1) * each])
                                              for j in range(take)],
                                             self.code(union), self.changed(code, union, False))
        return known

    def counts_at_or_above(self, port_min: int) -> np.ndarray:
        """Per code, how many of its ports are ``>= port_min`` (most sets lie wholly above it:
        their count is the answer)."""
        known = self._above.get(port_min)
        have = 0 if known is None else known.size
        if have < len(self.values):
            more = [p.count if not p.ranges or p.ranges[0][0] >= port_min else p.count_at_or_above(port_min)
                    for p in self.values[have:]]
            known = self._above[port_min] = np.concatenate(
                [known if known is not None else np.zeros(0, dtype=np.int64), np.array(more, dtype=np.int64)])
        return known


class PortColumn:
    """Per node, its free ports: a code per node into a shared :class:`PortTable`. Indexed,
    iterated, assigned and compared as a list of ``PortRanges`` is."""

    __slots__ = ("table", "codes")

    def __init__(self, ports: Sequence[PortRanges], table: PortTable | None = None):
        self.table = PortTable() if table is None else table
        self.codes = self.table.codes(ports)

    @classmethod
    def _of(cls, table: PortTable, codes: np.ndarray) -> "PortColumn":
        column = cls.__new__(cls)
        column.table, column.codes = table, codes
        return column

    def copy(self) -> "PortColumn":
        """Its own codes, the same table."""
        return PortColumn._of(self.table, self.codes.copy())

    def __len__(self) -> int:
        return self.codes.size

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(map(self.table.values.__getitem__, self.codes[i].tolist()))
        return self.table.values[self.codes.item(i)]

    def __iter__(self) -> Iterator[PortRanges]:
        return map(self.table.values.__getitem__, self.codes.tolist())

    def __setitem__(self, i, ports) -> None:
        if isinstance(i, slice):
            if isinstance(ports, PortColumn) and ports.table is self.table:
                self.codes[i] = ports.codes
            else:
                self.codes[i] = self.table.codes(list(ports))
            return
        self.set_code(i, self.table.code(ports))

    def set_code(self, i: int, code: int) -> None:
        """Node ``i`` holds the set of ``code`` (a code of this column's table)."""
        self.codes[i] = code

    def counts(self, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """How many free ports each node of ``rows`` has (every node when None)."""
        return self.table.counts()[self.codes if rows is None else self.codes[rows]]

    def counts_at_or_above(self, port_min: int, rows: np.ndarray | slice) -> np.ndarray:
        return self.table.counts_at_or_above(port_min)[self.codes[rows]]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PortColumn) and other.table is self.table:
            return bool(np.array_equal(self.codes, other.codes))
        if isinstance(other, (PortColumn, list, tuple)):
            return len(other) == len(self) and list(self) == list(other)
        return NotImplemented

    __hash__ = None   # (changeable)

    def __repr__(self) -> str:
        return f"PortColumn({list(self)!r})"

    def compact(self) -> None:
        """Past :data:`TABLE_KEPT` sets in its table, the column starts a table of its own with
        the sets it holds (copies keep the old one)."""
        if len(self.table) <= TABLE_KEPT:
            return
        live, codes = np.unique(self.codes, return_inverse=True)
        table = PortTable()
        for code in live.tolist():
            table.code(self.table.values[code])
        self.table, self.codes = table, codes.astype(np.int32).reshape(self.codes.shape)

    def take_many(self, rows: np.ndarray, taken: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each node ``rows[k]``, the code of its free ports less the set of code
        ``taken[k]`` (not written), and whether every port taken was free there. Each
        distinct (free, taken) pair is worked out once."""
        size = len(self.table)
        pairs = self.codes[rows].astype(np.int64) * size + taken
        unique, inverse = distinct(pairs, size * size)
        table, values = self.table, self.table.values
        free_codes, taken_codes = divmod(unique, size)
        lefts = np.array([table.changed(free, values[took], False)
                          for free, took in zip(free_codes.tolist(), taken_codes.tolist())], dtype=np.int32)
        counts = table.counts()
        whole = counts[lefts] == counts[free_codes] - counts[taken_codes]   # (a port taken not free leaves more)
        return lefts[inverse], whole[inverse]


class PortChoice(NamedTuple):
    """Ports chosen for many nodes at once, for :meth:`ClusterView.allocate_many`: one entry
    per distinct (free set, instances) pair the nodes hold (:meth:`PortTable.sequential`:
    ``free`` the code of the free set chosen from, ``takes`` the instances, ``taken`` the code
    of the ports they take, ``left`` the code of what is left), ``inverse`` each node's pair,
    codes of ``table``. A booking checks that each node still holds the set its ports were
    chosen from and writes what is left, without working the pairs out again."""

    free: np.ndarray
    takes: np.ndarray
    taken: np.ndarray
    left: np.ndarray
    inverse: np.ndarray
    table: PortTable

    def taken_per_node(self) -> np.ndarray:
        """The code of the ports each node takes."""
        return self.taken[self.inverse]


#: how many sequential choices a :class:`PortTable` keeps (then it starts afresh)
CHOICES_KEPT = 1 << 16

#: :func:`distinct` marks values in an array this long at most (else it sorts them)
MARKED_AT_MOST = 1 << 20


def distinct(values: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``values`` (non-negative, below ``bound``) in ascending order, and the
    position of each value among them: ``np.unique(values, return_inverse=True)``, by
    marking them in an array of ``bound`` when that is short (codes of a few sets: no sort
    of the thousands of nodes that hold them)."""
    if bound > MARKED_AT_MOST:
        unique, inverse = np.unique(values, return_inverse=True)
        return unique, inverse.reshape(-1)
    marked = np.zeros(bound, dtype=bool)
    marked[values] = True
    unique = np.flatnonzero(marked)
    position = np.zeros(bound, dtype=np.int64)
    position[unique] = np.arange(unique.size)
    return unique, position[values]
