"""ClusterView: the AM's own view of the cluster, one row per node.

:class:`NodeColumns` holds what a node has and what is free, in the integer units
of the fit model (:mod:`~gangmaster.selectors.fit`), and books through its checks;
the RM's ledger is built on the same class. :class:`ClusterView` adds what select()
reads besides: racks, labels, GPU types, health and per-role counts.

The view is columnar (numpy arrays indexed by node number) because select() must
filter and rank tens of thousands of nodes in microseconds: every filter is a
vector expression over these columns, never a Python loop over nodes. Per-node
values that are not numbers (host names) live in parallel lists; free port ranges are a
column of codes into a table of the distinct sets (:mod:`~gangmaster.selectors.port_column`).

The view is the only place that changes a node's usage, through
:meth:`ClusterView.allocate` and :meth:`ClusterView.release`, which refuse to
double-book a GPU, a port, or more memory/vcores than the node has.

GPU sharing: a GPU is wholly free (in ``gpu_free_mask``), taken whole, or holds
shares (``gpu_share_used``, milli-GPU per GPU). Whole-GPU bookings never touch the
share ledger, so a cluster without shares pays nothing for it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterable, Protocol, Sequence

import numpy as np

from gangmaster.gpu_topology.masks import full_mask, indices_of

from .fit import GPU_MILLI, Amounts, Demand, milli, shortfall
from .identity_memo import IdentityMemo
from .port_column import PortChoice, PortColumn
from .ports import NO_PORTS, PORT_MIN, PortRanges
from .resources import ResourceDescriptor, ResourceError

if TYPE_CHECKING:
    import numpy.typing as npt


class DerivedState(Protocol):
    """What :meth:`NodeColumns.derived` keeps: the rows changed since it was last brought up
    to date, and a copy of itself for a copy of the view."""

    dirty: set[int]

    def copy(self) -> DerivedState: ...


class UnknownHost(KeyError):
    """A host name the cluster view does not know."""

    def __str__(self) -> str:
        return f"unknown host {self.args[0]!r}"


@dataclass(frozen=True)
class NodeSpec:
    """A machine as declared in a cluster file or reported by the RM."""

    host: str
    rack: str = "default-rack"
    labels: frozenset[str] = frozenset()
    gpu_type: str | None = None
    topology: str | None = None
    memory_mb: int = 0
    vcores: float = 0.0
    gpus: int = 0
    ports: PortRanges = NO_PORTS
    #: the network domains above the rack, innermost first: ``(("switch", "sw-1"), ("block", "b0"))``
    #: (:mod:`~gangmaster.selectors.domains`)
    domains: tuple[tuple[str, str], ...] = ()

    @property
    def capacity(self) -> ResourceDescriptor:
        return _capacity(self.memory_mb, self.vcores, self.gpus, self.ports)


@lru_cache(maxsize=1024, typed=True)
def _capacity(memory_mb: int, vcores: float, gpus: int, ports: PortRanges) -> ResourceDescriptor:
    """A node's capacity, checked: one (immutable) value per kind of machine, of which a
    cluster of thousands of nodes has a few. Keyed by type too (8 and 8.0 vcores print apart)."""
    return ResourceDescriptor(memory_mb, vcores, gpus, full_mask(gpus), port_ranges=ports)


@dataclass(frozen=True)
class NodeView:
    """A snapshot of one node, for explanations, JSON output and tests. ``free`` names
    the wholly free GPUs; ``gpu_milli_free`` gives milli-GPU free on each of the node's
    GPUs (1000 wholly free, 0 taken whole, between: what its shares leave)."""

    host: str
    rack: str
    labels: frozenset[str]
    gpu_type: str | None
    topology: str | None
    healthy: bool
    capacity: ResourceDescriptor
    free: ResourceDescriptor
    outstanding_requests: int
    role_instances: dict[str, int] = field(default_factory=dict)
    failed_roles: frozenset[str] = frozenset()
    gpu_milli_free: tuple[int, ...] = ()


class NodeColumns:
    """Per-node capacity and free resources as integer columns, in the units of the fit
    model (:mod:`~gangmaster.selectors.fit`): memory in MB, vcores in millis, GPUs as a
    count and a mask, ports as ranges (with their counts in a column).

    Shared by the AM's :class:`ClusterView` and the RM's ledger, so both keep the same
    columns and book through the same checks: :meth:`_book` refuses what does not fit
    and :meth:`_unbook` what is not in use, so ``free + used == capacity`` always holds
    and nothing is handed out twice."""

    def __init__(self, specs: Iterable[NodeSpec]):
        specs = list(specs)
        self.specs = specs
        self.hosts = [s.host for s in specs]
        self.host_index = {h: i for i, h in enumerate(self.hosts)}
        if len(self.host_index) != len(self.hosts):
            seen: set[str] = set()
            for host in self.hosts:
                if host in seen:
                    raise ValueError(f"host {host!r} is declared twice")
                seen.add(host)
        self.memory_capacity = np.array([s.memory_mb for s in specs], dtype=np.int64)
        vcores, gpus = [s.vcores for s in specs], [s.gpus for s in specs]
        mvcores = {v: milli(v) for v in set(vcores)}   # a cluster has few kinds of machine: each converted once
        masks = {g: full_mask(g) for g in set(gpus)}
        self.mvcores_capacity = np.array([mvcores[v] for v in vcores], dtype=np.int64)
        self.gpu_capacity = np.array(gpus, dtype=np.int64)
        self.gpu_capacity_mask = np.array([masks[g] for g in gpus], dtype=np.uint64)
        # Free amounts are stored (not used amounts): select() reads them on every call.
        self.memory_free = self.memory_capacity.copy()
        self.mvcores_free = self.mvcores_capacity.copy()
        self.gpus_free = self.gpu_capacity.copy()
        self.gpu_free_mask = self.gpu_capacity_mask.copy()
        self.port_capacity = [s.ports for s in specs]
        self.ports_free = PortColumn(self.port_capacity)
        self.ports_free_count = self.ports_free.counts()
        #: the most GPUs a node has: the width of the per-GPU columns
        self.gpu_width = max(1, max(gpus, default=0))
        #: milli-GPU taken by shares, per node and GPU (0: wholly free, taken whole, or absent)
        self.gpu_share_used = np.zeros((len(specs), self.gpu_width), dtype=np.int32)
        #: each GPU's bit in a mask, for the per-GPU columns (uint64, gpu_width of them)
        self._gpu_bits = np.left_shift(np.uint64(1), np.arange(self.gpu_width, dtype=np.uint64))
        #: per node, how many of its GPUs hold shares (0: the share ledger has nothing here)
        self.gpus_shared = np.zeros(len(specs), dtype=np.int32)
        #: a share's "capacity": a node with a GPU could give any share when empty
        self.gpu_share_capacity = np.where(self.gpu_capacity > 0, GPU_MILLI, 0).astype(np.int32)
        self._share_ledger_shared = False   # copy-on-write with copies of the view
        self._column_caches: dict[str, _CachedColumn] = {}
        self._derived: dict[Hashable, DerivedState] = {}
        #: every cached column's, derived state's and watcher's (:meth:`watch_rows`) set, for _touched
        self._dirty_sets: list[set[int]] = []
        #: the derived states' and watchers' sets alone (a bulk change marks cached columns stale instead)
        self._row_sets: list[set[int]] = []
        #: counts every change of a row, so that a result read later can tell it is stale
        self.changes = 0
        self._port_capacity_counts: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.hosts)

    # ----------------------------------------------------------------- reading
    def amounts(self, i: int, empty: bool = False) -> Amounts:
        """Node ``i``'s free resources (its capacity when ``empty``) for the scalar checks.
        The per-GPU milli are given only where GPUs hold shares (elsewhere the whole
        GPUs say it all)."""
        if empty:
            ports = self.port_capacity[i]
            return Amounts(self.memory_capacity.item(i), self.mvcores_capacity.item(i),
                           self.gpu_capacity.item(i), self.gpu_capacity_mask.item(i), ports, ports.count)
        return Amounts(self.memory_free.item(i), self.mvcores_free.item(i), self.gpus_free.item(i),
                       self.gpu_free_mask.item(i), self.ports_free[i], self.ports_free_count.item(i),
                       tuple(self.gpu_milli_free_row(i)) if self.gpus_shared.item(i) else None)

    def gpu_milli_free_rows(self, rows: Sequence[int] | np.ndarray | slice | None = None,
                            gpu: int | None = None) -> np.ndarray:
        """Milli-GPU free per GPU of ``rows`` (an index array; every node when None or a
        slice): 1000 for a wholly free GPU, what shares leave on a shared one, 0 for a GPU
        taken whole or absent. int32, shape (rows, gpu_width); only column ``gpu`` when given."""
        every = rows is None or isinstance(rows, slice)
        masks = self.gpu_free_mask if every else self.gpu_free_mask[rows]
        used = self.gpu_share_used if every else self.gpu_share_used[rows]
        if gpu is not None:
            if gpu >= self.gpu_width:   # a GPU no node has (an ask may name one): nothing free on it
                return np.zeros(len(masks), dtype=np.int32)
            whole = (masks >> np.uint64(gpu)) & np.uint64(1) == 1
            used = used[:, gpu]
            return np.where(whole, GPU_MILLI, np.where(used > 0, GPU_MILLI - used, 0)).astype(np.int32)
        # a GPU has what its shares leave, all of it when wholly free, nothing when taken whole or absent
        free: np.ndarray = (GPU_MILLI - used) * ((used > 0) | (masks[:, None] & self._gpu_bits != 0))
        return free

    def gpu_milli_free_row(self, i: int) -> list[int]:
        """:meth:`gpu_milli_free_rows` of node ``i`` alone, as Python ints (no numpy call)."""
        mask = self.gpu_free_mask.item(i)
        if not self.gpus_shared.item(i):   # no shares here: wholly free or not
            return list(_whole_gpus_row(mask, self.gpu_width))
        return [GPU_MILLI if mask >> gpu & 1 else (GPU_MILLI - used if used > 0 else 0)
                for gpu, used in enumerate(self.gpu_share_used[i].tolist())]

    @property
    def gpu_milli_free(self) -> np.ndarray:
        """:meth:`gpu_milli_free_rows` of every node (computed: read, do not write)."""
        return self.gpu_milli_free_rows()

    @property
    def gpu_share_max_free(self) -> np.ndarray:
        """Per node, the most milli-GPU free on one of its GPUs (the share a node can still
        take), kept up to date row by row."""
        return self.cached_column("gpu-share-max-free",
                                  lambda view, rows: view.gpu_milli_free_rows(rows).max(axis=1),
                                  lambda view, i: max(view.gpu_milli_free_row(i)))

    def used_milli(self, i: int) -> np.ndarray:
        """Milli-GPU in use per GPU of node ``i`` (1000 − free for its GPUs; free + used =
        1000 per GPU always)."""
        present = np.arange(self.gpu_width) < self.gpu_capacity.item(i)
        return np.where(present, GPU_MILLI - self.gpu_milli_free_rows([i])[0], 0).astype(np.int32)

    def free(self, i: int) -> ResourceDescriptor:
        return ResourceDescriptor.exactly(self.memory_free.item(i), self.mvcores_free.item(i) / 1000.0,
                                          self.gpu_free_mask.item(i), self.ports_free[i])

    def used(self, i: int) -> ResourceDescriptor:
        return ResourceDescriptor.exactly(self.memory_capacity.item(i) - self.memory_free.item(i),
                                          (self.mvcores_capacity.item(i) - self.mvcores_free.item(i)) / 1000.0,
                                          self.gpu_capacity_mask.item(i) & ~self.gpu_free_mask.item(i),
                                          self.port_capacity[i].subtract(self.ports_free[i]))

    def ports_free_at_or_above(self, port_min: int) -> np.ndarray:
        """Per node, how many free ports are ``>= port_min`` (kept up to date incrementally)."""
        if port_min <= PORT_MIN:
            return self.ports_free_count
        return self.cached_column(f"ports-free>={port_min}",
                                  lambda view, rows: view.ports_free.counts_at_or_above(port_min, rows))

    def ports_capacity_at_or_above(self, port_min: int) -> np.ndarray:
        """Per node, how many of its ports are ``>= port_min`` (capacity never changes)."""
        counts = self._port_capacity_counts.get(port_min)
        if counts is None:
            counts = self._port_capacity_counts[port_min] = PortColumn(self.port_capacity).counts_at_or_above(
                port_min, slice(None))
        return counts

    def cached_column(self, name: str, compute: Callable[[Any, Any], np.ndarray],
                      compute_row: Callable[[Any, int], int] | None = None) -> np.ndarray:
        """A per-node column derived from node state, kept up to date incrementally.

        ``compute(view, rows)`` returns the values for ``rows`` (an index array, or
        ``slice(None)`` for every node). After a change to a node only its row is
        recomputed, so a strategy whose keys do not depend on the request (job
        packing) pays for a node's key once per change, not once per select().
        ``compute_row(view, i)``, when given, is the value of one row in plain Python:
        a few changed rows (up to :data:`ROWS_ONE_BY_ONE`) are brought up to date with
        it, more with ``compute`` at once."""
        cache = self._column_caches.get(name)
        if cache is None:
            cache = self._column_caches[name] = _CachedColumn(np.asarray(compute(self, slice(None))).copy())
            self._dirty_sets.append(cache.dirty)
        elif cache.stale:   # (a bulk change touched most rows: all of them, in one numpy call)
            cache.values[:] = compute(self, slice(None))
            cache.stale = False
            cache.dirty.clear()
        elif cache.dirty:
            dirty = cache.dirty
            if compute_row is not None and len(dirty) <= ROWS_ONE_BY_ONE:
                values = cache.values
                for i in dirty:
                    values[i] = compute_row(self, i)
            else:
                rows = np.fromiter(dirty, dtype=np.int64, count=len(dirty))
                cache.values[rows] = compute(self, rows)
            dirty.clear()
        return cache.values

    def derived(self, name: Hashable, build: Callable[[Any], DerivedState]) -> Any:
        """State derived from the rows and kept in step by its owner (a strategy's sorted
        node index, :mod:`~gangmaster.selectors.node_index`), found by ``name`` (any
        hashable value): ``build(view)`` makes it once; the view then adds every changed row to its ``dirty`` set, and gives a copy
        of itself ``state.copy()``."""
        state = self._derived.get(name)
        if state is None:
            state = self._derived[name] = build(self)
            self._dirty_sets.append(state.dirty)
            self._row_sets.append(state.dirty)
        return state

    def watch_rows(self) -> set[int]:
        """A set that every row changed from now on is added to (booked, given back, overwritten,
        its health or state set), for its caller to read and clear: a driver that keeps a view in
        step with these columns takes just the changed rows, with no log of its own. A copy of
        the columns does not carry it."""
        rows: set[int] = set()
        self._dirty_sets.append(rows)
        self._row_sets.append(rows)
        return rows

    def _touched(self, i: int) -> None:
        self.changes += 1
        for dirty in self._dirty_sets:   # (each cached column's and derived state's)
            dirty.add(i)

    def _touched_rows(self, rows: np.ndarray) -> None:
        """:meth:`_touched` for many rows at once (a bulk booking, distinct rows). Where they
        are a good part of the nodes, a cached column is marked stale as a whole (made again
        in one numpy call when read) rather than told each row."""
        self.changes += 1
        if rows.size * BULK_SHARE < len(self):
            for dirty in self._dirty_sets:
                dirty.update(rows.tolist())
            return
        for cache in self._column_caches.values():
            cache.stale = True
        if self._row_sets:
            listed = rows.tolist()
            for dirty in self._row_sets:
                dirty.update(listed)

    # ----------------------------------------------------------------- booking
    def _book(self, i: int, exact: Demand) -> None:
        """Take exactly these resources (the GPUs by mask, the ports by range) from node
        ``i``; raises :class:`ResourceError` naming the first short dimension, and
        changes nothing, when they are not all free.

        The fit is :func:`~gangmaster.selectors.fit.shortfall`'s rule for an exact demand
        (every amount stays >= 0, every GPU and port named is free), worked out here on
        what would be left, which is then stored: the RM books every container of a gang
        through this, so it reads each column once. The reason is asked of ``shortfall``
        only on a refusal."""
        if _named_exactly.get(id(exact)) is None:
            self._check_exact(i, exact)
        memory = self.memory_free.item(i) - exact.memory_mb
        mvcores = self.mvcores_free.item(i) - exact.mvcores
        free_mask = self.gpu_free_mask.item(i)
        taken = exact.port_ranges
        ports_short = False
        if taken.ranges:
            column = self._writable_ports()
            left = column.table.changed(column.codes.item(i), taken, adding=False)
            left_count = column.table.counts().item(left)
            ports_short = left_count != self.ports_free_count.item(i) - taken.count   # some port taken was not free
        gpu_short = (self._share_left(i, exact) < 0 if exact.gpu_milli
                     else exact.gpu_mask & ~free_mask)
        if memory < 0 or mvcores < 0 or gpu_short or ports_short:
            raise ResourceError(f"host {self.hosts[i]}: {exact} does not fit in free {self.free(i)} "
                                f"({shortfall(exact, self.amounts(i))})")
        self.memory_free[i] = memory
        self.mvcores_free[i] = mvcores
        if exact.gpu_milli:
            self._take_share(i, exact.gpu_mask, exact.gpu_milli)
        elif exact.gpu_mask:
            self.gpus_free[i] = self.gpus_free.item(i) - exact.gpus
            self.gpu_free_mask[i] = free_mask & ~exact.gpu_mask
        if taken.ranges:
            column.set_code(i, left)
            self.ports_free_count[i] = left_count
        self._touched(i)

    def _unbook(self, i: int, exact: Demand) -> None:
        """Give back what :meth:`_book` took; raises, changing nothing, for anything not in use."""
        if _named_exactly.get(id(exact)) is None:
            self._check_exact(i, exact)
        free_mask = self.gpu_free_mask.item(i)
        used_mask = self.gpu_capacity_mask.item(i) & ~free_mask
        if exact.gpu_milli:
            gpu = exact.gpu_mask.bit_length() - 1
            if self.gpu_share_used.item(i, gpu) < exact.gpu_milli:
                raise ResourceError(f"host {self.hosts[i]}: {exact.gpu_milli} milli of GPU {gpu} are not in use "
                                    f"by shares ({self.gpu_share_used.item(i, gpu)} are)")
        elif exact.gpu_mask & ~used_mask or (exact.gpu_mask and self.gpus_shared.item(i)
                                             and self._holds_shares(i, exact.gpu_mask)):
            raise ResourceError(f"host {self.hosts[i]}: GPUs {indices_of(exact.gpu_mask & ~used_mask)} "
                                f"are not in use (or hold shares, not a whole booking)")
        memory = self.memory_free.item(i) + exact.memory_mb
        mvcores = self.mvcores_free.item(i) + exact.mvcores
        if memory > self.memory_capacity.item(i) or mvcores > self.mvcores_capacity.item(i):
            raise ResourceError(f"host {self.hosts[i]}: returning {exact} exceeds what is in use")
        returned = exact.port_ranges
        if returned.ranges:
            column = self._writable_ports()
            after = column.table.changed(column.codes.item(i), returned, adding=True)
            after_count = column.table.counts().item(after)
            if after_count != self.ports_free_count.item(i) + returned.count:   # some port returned was free
                raise ResourceError(f"host {self.hosts[i]}: ports {returned.intersect(self.ports_free[i])} "
                                    f"are not in use")
        self.memory_free[i] = memory
        self.mvcores_free[i] = mvcores
        if exact.gpu_milli:
            self._return_share(i, exact.gpu_mask, exact.gpu_milli)
        elif exact.gpu_mask:
            self.gpus_free[i] = self.gpus_free.item(i) + exact.gpus
            self.gpu_free_mask[i] = free_mask | exact.gpu_mask
        if returned.ranges:
            column.set_code(i, after)
            self.ports_free_count[i] = after_count
        self._touched(i)

    def _writable_ports(self) -> PortColumn:
        """The free-port column, its table started afresh first when it has grown past
        :data:`~gangmaster.selectors.port_column.TABLE_KEPT` sets (a one-node write: no bulk
        step holds its codes now)."""
        column = self.ports_free
        column.compact()
        return column

    def _check_exact(self, i: int, exact: Demand) -> None:
        """Raise :class:`ResourceError` unless ``exact`` names its GPUs and ports; a demand
        that does is remembered (:data:`_named_exactly`): the RM books the same few again
        and again, and a demand is a value nobody changes."""
        named = int(exact.gpu_mask).bit_count()
        if (exact.gpus != named if not exact.gpu_milli else exact.gpus or named != 1) \
                or exact.ports != exact.port_ranges.count:
            raise ResourceError(f"host {self.hosts[i]}: a booking names its GPUs (a mask; one GPU for a share) "
                                f"and its ports (ranges), got {exact}")
        _named_exactly.put(id(exact), (exact,), True)

    # ----------------------------------------------------------------- GPU shares
    def _share_left(self, i: int, exact: Demand) -> int:
        """Milli that would be left on the share's GPU (negative: it does not fit)."""
        gpu = exact.gpu_mask.bit_length() - 1
        if gpu >= self.gpu_capacity.item(i):
            return -1
        if self.gpu_free_mask.item(i) >> gpu & 1:
            return GPU_MILLI - exact.gpu_milli
        used = self.gpu_share_used.item(i, gpu)
        return (GPU_MILLI - used if used else 0) - exact.gpu_milli

    def _take_share(self, i: int, gpu_mask: int, amount: int) -> None:
        gpu = gpu_mask.bit_length() - 1
        ledger = self._writable_share_ledger()
        if ledger.item(i, gpu) == 0:   # the GPU was wholly free (checked): it holds shares now
            self.gpu_free_mask[i] = self.gpu_free_mask.item(i) & ~gpu_mask
            self.gpus_free[i] = self.gpus_free.item(i) - 1
            self.gpus_shared[i] = self.gpus_shared.item(i) + 1
        ledger[i, gpu] = ledger.item(i, gpu) + amount

    def _return_share(self, i: int, gpu_mask: int, amount: int) -> None:
        gpu = gpu_mask.bit_length() - 1
        ledger = self._writable_share_ledger()
        left = ledger[i, gpu] = ledger.item(i, gpu) - amount
        if left == 0:   # its last share left: the GPU is wholly free again
            self.gpu_free_mask[i] = self.gpu_free_mask.item(i) | gpu_mask
            self.gpus_free[i] = self.gpus_free.item(i) + 1
            self.gpus_shared[i] = self.gpus_shared.item(i) - 1

    def _holds_shares(self, i: int, gpu_mask: int) -> bool:
        return bool(self.gpus_shared.item(i)) and any(
            self.gpu_share_used.item(i, gpu) for gpu in indices_of(gpu_mask) if gpu < self.gpu_width)

    def _writable_share_ledger(self) -> np.ndarray:
        if self._share_ledger_shared:   # shared with a copy since: this one gets its own now
            self.gpu_share_used = self.gpu_share_used.copy()
            self._share_ledger_shared = False
        return self.gpu_share_used

    def _set_ports_free(self, i: int, ports: PortRanges) -> None:
        self._writable_ports()[i] = ports
        self.ports_free_count[i] = ports.count

    def _copy_columns(self, clone: "NodeColumns", keep_derived: bool = True, keep_indexes: bool = True) -> None:
        """Give a shallow copy its own changeable columns (for trial placement); without
        ``keep_derived``, no cached column or derived state (made again when read); without
        ``keep_indexes``, no derived state (the cached columns kept)."""
        for name in ("memory_free", "mvcores_free", "gpus_free", "gpu_free_mask", "ports_free_count", "gpus_shared"):
            setattr(clone, name, getattr(self, name).copy())
        # the share ledger (nodes x GPUs) is shared until one side writes to it
        self._share_ledger_shared = clone._share_ledger_shared = True
        clone.ports_free = self.ports_free.copy()
        clone._column_caches = {name: _CachedColumn(c.values.copy(), set(c.dirty), c.stale)
                                for name, c in self._column_caches.items()} if keep_derived else {}
        clone._derived = ({name: state.copy() for name, state in self._derived.items()}
                          if keep_derived and keep_indexes else {})
        clone._row_sets = [state.dirty for state in clone._derived.values()]
        clone._dirty_sets = [c.dirty for c in clone._column_caches.values()] + clone._row_sets


class ClusterView(NodeColumns):
    """The node columns, with what select() also reads: racks, labels, GPU types,
    health, and per-role bookkeeping."""

    def __init__(self, specs: Iterable[NodeSpec]):
        super().__init__(specs)
        specs = self.specs
        n = len(specs)
        self.racks, self.rack_code = _encode([s.rack for s in specs])
        self.gpu_types, self.gpu_type_code = _encode([s.gpu_type or "" for s in specs])
        self.topologies, self.topology_code = _encode([s.topology or "" for s in specs])
        self.label_bit: dict[str, int] = {}
        bits_of: dict[frozenset[str], int] = {}   # per set of labels (nodes of a kind share one)
        for s in specs:
            if s.labels not in bits_of:
                for label in sorted(s.labels):
                    self.label_bit.setdefault(label, 1 << len(self.label_bit))
                bits_of[s.labels] = -1
        if len(self.label_bit) > 64:
            raise ValueError(f"at most 64 distinct node labels are supported, got {len(self.label_bit)}")
        bits_of = {labels: sum(self.label_bit[l] for l in labels) for labels in bits_of}
        self.label_bits = np.array([bits_of[s.labels] for s in specs], dtype=np.uint64)
        self.healthy = np.ones(n, dtype=bool)
        self.outstanding = np.zeros(n, dtype=np.int64)
        #: rack_rows()'s grouping, built once when first asked by this view or any copy of it (the
        #: one holder is shared by copies, made before or after: racks never change)
        self._by_rack: list[tuple[np.ndarray, list[int]]] = []
        self.role_count: dict[str, np.ndarray] = {}
        self.role_failed: dict[str, np.ndarray] = {}
        #: what callers make once for this view and objects of theirs nobody changes (a
        #: request's pick of one node, :class:`~gangmaster.selectors.placement.LonePick`), found by
        #: those objects' identity; bound to this view, so a copy starts with none
        self.prepared: IdentityMemo[Any] = IdentityMemo(PREPARED_KEPT)

    # ----------------------------------------------------------------- reading
    def index(self, host: str) -> int:
        try:
            return self.host_index[host]
        except KeyError:
            raise UnknownHost(host) from None

    @property
    def memory_used(self) -> npt.NDArray[np.int64]:
        return self.memory_capacity - self.memory_free

    @property
    def vcores_capacity(self) -> npt.NDArray[np.float64]:
        """vcores as floats (for display and strategy plugins); the columns are in millis."""
        return self.mvcores_capacity / 1000.0

    @property
    def vcores_free(self) -> npt.NDArray[np.float64]:
        return self.mvcores_free / 1000.0

    @property
    def vcores_used(self) -> npt.NDArray[np.float64]:
        return (self.mvcores_capacity - self.mvcores_free) / 1000.0

    @property
    def gpus_used(self) -> npt.NDArray[np.int64]:
        return self.gpu_capacity - self.gpus_free

    @property
    def gpu_used_mask(self) -> np.ndarray:
        return self.gpu_capacity_mask & ~self.gpu_free_mask

    def rack_rows(self, racks: Iterable[int]) -> np.ndarray:
        """The nodes of ``racks`` (rack codes, repeats ignored), rack by rack, each in
        node order. The nodes are grouped by rack once per view and its copies (racks never
        change: a gang's scratch copy that groups them groups them for the view too)."""
        if not self._by_rack:
            by_rack = np.argsort(self.rack_code, kind="stable")
            starts = np.searchsorted(self.rack_code[by_rack], np.arange(len(self.racks) + 1)).tolist()
            self._by_rack.append((by_rack, starts))
        by_rack, starts = self._by_rack[0]
        chosen = sorted({int(r) for r in racks})
        if len(chosen) == 1:
            return by_rack[starts[chosen[0]]:starts[chosen[0] + 1]]
        return np.concatenate([by_rack[starts[r]:starts[r + 1]] for r in chosen] or [np.zeros(0, dtype=np.int64)])

    def is_empty(self) -> bool:
        """True when the view is as a new view of its nodes would be: nothing used, every
        node healthy, no per-role counts or failures, nothing outstanding."""
        return bool((self.memory_free == self.memory_capacity).all()
                    and (self.mvcores_free == self.mvcores_capacity).all()
                    and (self.gpu_free_mask == self.gpu_capacity_mask).all()
                    and not self.gpus_shared.any()
                    and self.ports_free == self.port_capacity
                    and self.healthy.all() and not self.outstanding.any()
                    and not any(c.any() for c in self.role_count.values())
                    and not any(f.any() for f in self.role_failed.values()))

    def free_mask(self, i: int) -> int:
        return self.gpu_free_mask.item(i)

    def instances_of(self, role: str) -> np.ndarray:
        counts = self.role_count.get(role)
        if counts is None:
            counts = self.role_count[role] = np.zeros(len(self), dtype=np.int64)
        return counts

    def failed_here(self, role: str) -> np.ndarray | None:
        """Bool column: this role already failed on the node (None: nowhere)."""
        return self.role_failed.get(role)

    def node(self, i_or_host: int | str) -> NodeView:
        i = self.index(i_or_host) if isinstance(i_or_host, str) else i_or_host
        spec = self.specs[i]
        return NodeView(
            host=spec.host, rack=spec.rack, labels=spec.labels, gpu_type=spec.gpu_type,
            topology=spec.topology, healthy=bool(self.healthy[i]), capacity=spec.capacity,
            free=self.free(i), outstanding_requests=int(self.outstanding[i]),
            role_instances={r: int(c[i]) for r, c in self.role_count.items() if c[i]},
            failed_roles=frozenset(r for r, f in self.role_failed.items() if f[i]),
            gpu_milli_free=tuple(self.gpu_milli_free_rows([i])[0, :spec.gpus].tolist()),
        )

    def nodes(self) -> list[NodeView]:
        return [self.node(i) for i in range(len(self))]

    # ----------------------------------------------------------------- changing
    def allocate(self, host_or_index: int | str, resource: ResourceDescriptor,
                 role: str | None = None) -> None:
        """Book ``resource`` on the node. The GPUs must be named by mask when the
        request has GPUs, the ports by range; booking what is not free raises
        :class:`ResourceError` and changes nothing."""
        i = self.index(host_or_index) if isinstance(host_or_index, str) else host_or_index
        if (resource.gpus or resource.gpu_milli) and not resource.gpu_mask:
            raise ResourceError(f"host {self.hosts[i]}: a GPU allocation must name its GPUs (gpu_mask; "
                                f"the GPU shared, for a share)")
        if resource.ports and not resource.port_ranges:
            raise ResourceError(f"host {self.hosts[i]}: a port allocation must name its ports")
        self._book(i, Demand.of(resource))
        if role is not None:
            self.instances_of(role)[i] += 1

    def allocate_many(self, rows: np.ndarray, counts: np.ndarray, each: Demand, gpus: np.ndarray | None,
                      ports: Sequence[PortRanges] | np.ndarray | PortChoice | None, role: str | None = None) -> None:
        """Book ``counts[k]`` instances of ``each`` on node ``rows[k]`` at once (gang
        placement), taking there the GPUs ``gpus[k]`` (a mask; None when ``each`` asks
        none) and the ports ``ports[k]`` (None when ``each`` asks none; the sets, their
        codes in ``ports_free.table`` as an integer array, or a :class:`PortChoice` made
        from the nodes' free ports as they stand). Refuses with
        :class:`ResourceError`, changing nothing, when the totals do not fit in what is
        free: the same rule as :meth:`allocate` once per instance."""
        if each.gpu_milli:
            raise ResourceError("allocate_many: GPU shares are booked one by one (allocate): each names its GPU")
        at = np.asarray(rows, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        column = self.ports_free
        if isinstance(ports, PortChoice) and (at.size <= FEW_ROWS or ports.table is not column.table):
            # (the ports each node takes, as sets: checked and written as any others)
            ports = list(map(ports.table.values.__getitem__, ports.taken_per_node().tolist()))
        if at.size <= FEW_ROWS:   # (a pick, the job's hosts: in plain Python, not dozens of numpy calls)
            self._allocate_few(at.tolist(), counts.tolist(), each, None if gpus is None else list(map(int, gpus)),
                               None if ports is None else list(ports), role)
            return
        if _named_twice(at, len(self)):
            raise ResourceError("allocate_many: a node is named twice")
        # what would be left, worked out once: compared with 0 here, written below if all fit
        memory = self.memory_free[at] - counts * each.memory_mb
        mvcores = self.mvcores_free[at] - counts * each.mvcores
        short = (memory < 0) | (mvcores < 0)
        if gpus is not None:
            gpus = np.asarray(gpus, dtype=np.uint64)
            masks = self.gpu_free_mask[at]
            short |= ((masks & gpus) != gpus) | (_popcounts(gpus) != counts * each.gpus)
        if isinstance(ports, PortChoice):
            # each pair took what was free, as many ports as its instances ask; each node still
            # holds the set its ports were chosen from, and takes the pair's instances
            sizes = column.table.counts()
            whole = ((sizes[ports.left] == sizes[ports.free] - sizes[ports.taken])
                     & (sizes[ports.taken] == ports.takes * each.ports))
            if ports.free.size == 1:   # (one pair for every node, a gang's role on a cluster of a kind)
                short |= (column.codes[at] != ports.free.item(0)) | (counts != ports.takes.item(0))
                short |= not whole.item(0)
                left: np.ndarray | int = ports.left.item(0)
            else:
                inverse = ports.inverse
                short |= ((column.codes[at] != ports.free[inverse]) | (ports.takes[inverse] != counts)
                          | ~whole[inverse])
                left = ports.left[inverse]
        elif ports is not None:
            taken = ports if isinstance(ports, np.ndarray) else column.table.codes(ports)
            # each distinct (free, taken) pair worked out once: nodes of a kind share theirs
            left, whole = column.take_many(at, taken)
            short |= ~whole | (column.table.counts()[taken] != counts * each.ports)
        if short.any():
            k = int(np.argmax(short))
            raise ResourceError(f"host {self.hosts[int(at[k])]}: {counts[k]} x {each} do not fit in free "
                                f"{self.free(int(at[k]))}")
        self.memory_free[at] = memory
        self.mvcores_free[at] = mvcores
        if gpus is not None:
            self.gpus_free[at] -= counts * each.gpus
            self.gpu_free_mask[at] = masks & ~gpus
        if ports is not None:
            column.codes[at] = left
            self.ports_free_count[at] = column.table.counts()[left]   # (grown, maybe: read again)
        self._touched_rows(at)
        if role is not None:
            self.instances_of(role)[at] += counts

    def _allocate_few(self, rows: list[int], counts: list[int], each: Demand, gpus: list[int] | None,
                      ports: list[Any] | None, role: str | None) -> None:
        """:meth:`allocate_many` of a few nodes, one after another in plain Python: every
        node checked before any is written (``ports``: the sets or their codes in the table)."""
        if len(set(rows)) != len(rows):
            raise ResourceError("allocate_many: a node is named twice")
        column = self.ports_free
        table = column.table
        sizes = table.counts()
        bookings = []
        for k, (i, count) in enumerate(zip(rows, counts)):
            memory = self.memory_free.item(i) - count * each.memory_mb
            mvcores = self.mvcores_free.item(i) - count * each.mvcores
            short = memory < 0 or mvcores < 0
            if gpus is not None:
                short = short or gpus[k] & self.gpu_free_mask.item(i) != gpus[k] or \
                    gpus[k].bit_count() != count * each.gpus
            left = None
            if ports is not None:
                taken = table.code(ports[k]) if isinstance(ports[k], PortRanges) else int(ports[k])
                left = table.changed(column.codes.item(i), table.values[taken], False)
                sizes = table.counts()   # (grown, maybe)
                short = short or (sizes.item(left) != self.ports_free_count.item(i) - sizes.item(taken)
                                  or sizes.item(taken) != count * each.ports)
            if short:
                raise ResourceError(f"host {self.hosts[i]}: {count} x {each} do not fit in free {self.free(i)}")
            bookings.append((i, count, memory, mvcores, left))
        instances = self.instances_of(role) if role is not None else None
        for k, (i, count, memory, mvcores, left) in enumerate(bookings):
            self.memory_free[i] = memory
            self.mvcores_free[i] = mvcores
            if gpus is not None:
                self.gpus_free[i] = self.gpus_free.item(i) - count * each.gpus
                self.gpu_free_mask[i] = self.gpu_free_mask.item(i) & ~gpus[k]
            if left is not None:
                column.set_code(i, left)
                self.ports_free_count[i] = sizes.item(left)
            self._touched(i)
            if instances is not None:
                instances[i] += count

    def release(self, host_or_index: int | str, resource: ResourceDescriptor,
                role: str | None = None) -> None:
        """Give back what :meth:`allocate` booked; releasing what is not in use raises."""
        i = self.index(host_or_index) if isinstance(host_or_index, str) else host_or_index
        self._unbook(i, Demand.of(resource))
        if role is not None and role in self.role_count and self.role_count[role][i] > 0:
            self.role_count[role][i] -= 1

    def set_health(self, host: str, healthy: bool) -> None:
        i = self.index(host)
        self.healthy[i] = healthy
        self._touched(i)

    def set_health_rows(self, rows: np.ndarray, healthy: np.ndarray | bool) -> None:
        """:meth:`set_health` of many nodes at once (by row): a gang kept inside one network
        domain is placed on a copy whose other nodes are out of play."""
        self.healthy[rows] = healthy
        self._touched_rows(np.asarray(rows, dtype=np.int64).reshape(-1))

    def mark_failed(self, role: str, host: str) -> None:
        failed = self.role_failed.get(role)
        if failed is None:
            failed = self.role_failed[role] = np.zeros(len(self), dtype=bool)
        failed[self.index(host)] = True
        self.changes += 1

    def forget_failures(self, role: str) -> None:
        """``role`` is no longer kept off the nodes where it failed (:meth:`mark_failed`)."""
        if self.role_failed.pop(role, None) is not None:
            self.changes += 1

    def set_free(self, host_or_index: int | str, free: ResourceDescriptor,
                 gpu_milli_free: tuple[int, ...] | None = None) -> bool:
        """Overwrite what is free on a node from an RM node report (the RM holds the truth):
        ``free`` names the wholly free GPUs; ``gpu_milli_free`` (per GPU, when the report
        has shares) what shares leave on the others. A GPU reported at 0 keeps its
        shares if the view had some (full of shares and taken whole read the same).

        Returns whether the node has more room than before in memory, vcores, wholly
        free GPUs or ports (a GPU or port freed counts even when another was taken);
        what shares leave on a GPU is not compared (the AM's tracker compares it)."""
        i = self.index(host_or_index) if isinstance(host_or_index, str) else host_or_index
        mask = self.gpu_capacity_mask.item(i) & free.gpu_mask
        more = self._overwrite_free(i, free.memory_mb, milli(free.vcores), mask)
        if gpu_milli_free is not None or self.gpus_shared.item(i):
            self._set_shares(i, mask, gpu_milli_free or ())
        ports, before = free.port_ranges, self.ports_free[i]
        if ports is not before:   # (the very ports the view holds: within the node's, as they are)
            if ports.ranges:
                ports = ports.intersect(self.port_capacity[i])
            if ports is not before:
                more = more or ports_grew(ports, before)
                self._set_ports_free(i, ports)
        self._touched(i)
        return more

    def take_free_row(self, source: "NodeColumns", i: int) -> bool:
        """:meth:`set_free` of node ``i`` from ``source``'s own columns (the same nodes in the
        same order: the RM's ledger, for a driver that keeps one view for all its AMs), where
        neither holds GPU shares on it: what ``source`` has free becomes what the view has free,
        without a report and its descriptor. Returns whether the node has more room than
        before, as :meth:`set_free` does."""
        more = self._overwrite_free(i, source.memory_free.item(i), source.mvcores_free.item(i),
                                    source.gpu_free_mask.item(i))
        ports, before = source.ports_free[i], self.ports_free[i]
        if ports is not before and ports != before:
            more = more or ports_grew(ports, before)
            self._set_ports_free(i, ports)
        self._touched(i)
        return more

    def withhold_gpus(self, i: int, keep: int = 0) -> int:
        """Show node ``i`` with only ``keep`` of its wholly free GPUs (its lowest-numbered): a
        reservation holds the others for another gang, as a trace replay's queue policy
        ``reserve`` does while a smaller gang is placed; returns the free-GPU mask to give back
        with :meth:`give_back_gpus`."""
        mask = shown = self.gpu_free_mask.item(i)
        for _ in range(max(0, mask.bit_count() - keep)):
            shown &= ~(1 << (shown.bit_length() - 1))   # (the highest-numbered free GPU withheld)
        self._overwrite_free(i, self.memory_free.item(i), self.mvcores_free.item(i), shown)
        self._touched(i)
        return mask

    def give_back_gpus(self, i: int, mask: int) -> None:
        """Undo :meth:`withhold_gpus` of node ``i``: its free GPUs are ``mask`` again."""
        self._overwrite_free(i, self.memory_free.item(i), self.mvcores_free.item(i), mask)
        self._touched(i)

    def _overwrite_free(self, i: int, memory: int, mvcores: int, mask: int) -> bool:
        """Node ``i``'s free memory, vcores and wholly free GPUs (``mask``) become these; whether
        any of them grew (a GPU freed counts even when another was taken)."""
        more = (memory > self.memory_free.item(i) or mvcores > self.mvcores_free.item(i)
                or bool(mask & ~self.gpu_free_mask.item(i)))
        self.memory_free[i] = memory
        self.mvcores_free[i] = mvcores
        self.gpu_free_mask[i] = mask
        self.gpus_free[i] = mask.bit_count()
        return more

    def _set_shares(self, i: int, free_mask: int, milli_free: tuple[int, ...]) -> None:
        """Node ``i``'s row of the share ledger from a report (:meth:`set_free`), worked
        out in plain Python and written only when it changed."""
        was = self.gpu_share_used[i].tolist()
        gpus, reports = self.gpu_capacity.item(i), len(milli_free)
        row = []
        for gpu, used in enumerate(was):
            reported = milli_free[gpu] if gpu < reports else 0
            if free_mask >> gpu & 1 or gpu >= gpus:
                used = 0
            elif 0 < reported < GPU_MILLI:
                used = GPU_MILLI - reported
            elif reported == 0 and used != GPU_MILLI:
                used = 0   # taken whole (a GPU full of shares the view knew stays so)
            row.append(used)
        if row != was:
            self._writable_share_ledger()[i] = row
        self.gpus_shared[i] = sum(used > 0 for used in row)

    def copy(self, keep_derived: bool = True, keep_indexes: bool = True) -> "ClusterView":
        """A scratch copy for trial placement (a gang is committed only if it all fits).
        ``keep_derived=False``: a copy of the state alone, for reading later (an explanation
        worked out when asked): what strategies derive from it (cached columns, node
        indexes) is made again only if read, not copied now. ``keep_indexes=False``: the
        cached columns kept, the node indexes (:meth:`derived`) not — a copy that books
        thousands of rows in bulk and picks by the view's own indexes, not its own, would
        only feed each of them every row it books."""
        clone = copy.copy(self)
        self._copy_columns(clone, keep_derived, keep_indexes)
        clone.healthy = self.healthy.copy()
        clone.outstanding = self.outstanding.copy()
        clone.role_count = {r: c.copy() for r, c in self.role_count.items()}
        clone.role_failed = {r: f.copy() for r, f in self.role_failed.items()}
        clone.prepared = IdentityMemo(PREPARED_KEPT)
        return clone


#: :meth:`NodeColumns.allocate_many` books up to this many nodes one by one in plain Python.
FEW_ROWS = 8

#: A bulk change of at least one row in BULK_SHARE marks the cached columns stale as a whole
#: (:meth:`NodeColumns._touched_rows`): one numpy call over every node when read, instead of
#: a Python int per row in each column's set.
BULK_SHARE = 8

#: :meth:`NodeColumns.cached_column` brings up to this many changed rows up to date one by one
#: (with a column's ``compute_row``), more with one numpy call.
ROWS_ONE_BY_ONE = 16

#: How many answers :attr:`ClusterView.prepared` keeps (then it starts afresh): one per
#: request shape and pipeline (a pick of one node), or per role and pipeline (a gang of
#: one); ``gangmaster bench select``'s stream asks 360 shapes, a trace replay a few.
PREPARED_KEPT = 4096

#: id(demand) -> True: the demands :meth:`NodeColumns._check_exact` found to name their GPUs and ports
_named_exactly: IdentityMemo[bool] = IdentityMemo(4096)


@dataclass
class _CachedColumn:
    values: np.ndarray
    dirty: set[int] = field(default_factory=set)
    #: every row may have changed (a bulk change): made again whole when read
    stale: bool = False


@lru_cache(maxsize=4096)
def _whole_gpus_row(free_mask: int, width: int) -> tuple[int, ...]:
    """Milli-GPU free per GPU of a node whose GPUs hold no shares: all of a GPU in
    ``free_mask``, none of the others (a node's few masks, worked out once each)."""
    return tuple(GPU_MILLI if free_mask >> gpu & 1 else 0 for gpu in range(width))



def _named_twice(rows: np.ndarray, size: int) -> bool:
    """Some row of ``rows`` (all in ``0..size-1``) appears twice."""
    seen = np.zeros(size, dtype=bool)
    seen[rows] = True
    return int(np.count_nonzero(seen)) != rows.size


def ports_grew(now: PortRanges, before: PortRanges) -> bool:
    """Some port of ``now`` is not in ``before`` (none can be when ``now`` is empty)."""
    return bool(now.ranges) and now != before and bool(now.subtract(before))


#: numpy's own count of set bits (numpy >= 2), else None
_BITWISE_COUNT = getattr(np, "bitwise_count", None)


def _encode(values: list[str]) -> tuple[list[str], np.ndarray]:
    names: dict[str, int] = {}
    codes = np.array([names.setdefault(v, len(names)) for v in values], dtype=np.int32)
    return list(names), codes


def _popcounts(masks: np.ndarray) -> np.ndarray:
    """Set bits per uint64 (numpy < 2 has no bitwise_count)."""
    if _BITWISE_COUNT is not None:
        counted: np.ndarray = _BITWISE_COUNT(masks).astype(np.int64)
        return counted
    x = masks - ((masks >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    counts: np.ndarray = ((x * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int64)
    return counts
