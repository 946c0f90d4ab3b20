"""The strategy plugin interface, and the registry that finds strategies by name.

A strategy ranks the nodes that survived the filters. To write one, subclass
:class:`Selector` and override :meth:`Selector.rank` (or, when a node's key depends
only on that node's state, :meth:`Selector.node_key`: select() then walks an index
kept sorted by it instead of ranking every node); register it under the
``gangmaster.selectors`` entry-point group of your package (or call
:func:`register_selector` in-process; :func:`selector_registered` registers one for
a ``with`` block only, as a test does)::

    import numpy as np
    from gangmaster.selectors.selector import Selector, register_selector

    class EmptiestFirst(Selector):
        \"\"\"Spread load: prefer the node with the most free vcores.\"\"\"

        name = "emptiest-first"
        description = "most free vcores first (spreads load)"

        def rank(self, view, candidates, request):
            # One key per candidate node; lower ranks first. Use numpy: the
            # candidates can be 100,000 nodes and select() has microseconds.
            return -view.mvcores_free[candidates]

    register_selector(EmptiestFirst)

    # In pyproject.toml of your package, instead of register_selector():
    # [project.entry-points."gangmaster.selectors"]
    # emptiest-first = "mypkg.strategies:EmptiestFirst"

The filters have already removed every node that cannot take the request, so a
rank never needs to check fit. The pipeline orders the nodes by locality first and
breaks exact ties by an order of the nodes drawn from the seed, so ``rank`` should
not randomise; a strategy declares how exact ties are broken in ``tie_rule``. A
strategy that plans for the workload to come overrides
:meth:`Selector.observe_workload`. Run the shared property suite
(``tests/property/test_selector_contract.py``) against your class.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np

from gangmaster.gpu_topology.masks import lowest_bits

if TYPE_CHECKING:
    import numpy.typing as npt

    from .cluster import ClusterView
    from .request import SelectionRequest
    from .workload import WorkloadShapes

ENTRY_POINT_GROUP = "gangmaster.selectors"


class UnknownSelector(LookupError):
    def __init__(self, name: str, known: list[str], why: str = "unknown selector"):
        self.name, self.known = name, known
        super().__init__(f"{why}: {name!r}; known selectors: {', '.join(known)}")

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class NodeKey:
    """A key column that depends only on node state (and the request's resource): its
    name in the view's cache, and ``compute(view, rows)`` for the rows asked (an index
    array, or ``slice(None)`` for every node). Integer keys, lower is better.

    ``compute_row(view, i)``, when given, is the same key of one node as a Python int,
    in plain Python: the view brings the few rows that change between two placements up
    to date with it (a numpy call on a handful of rows costs more than the arithmetic).
    It must agree with ``compute`` on every node (the selector contract tests hold it)."""

    name: str
    compute: Callable[["ClusterView", object], np.ndarray]
    compute_row: Callable[["ClusterView", int], int] | None = None

    def column(self, view: "ClusterView") -> np.ndarray:
        """Every node's key, kept up to date by the view row by row."""
        return view.cached_column(self.name, self.compute, self.compute_row)


class Selector:
    """Base class of node-ranking strategies."""

    name: str = ""
    description: str = ""
    #: the final pick prefers hosts, then racks, that hold the job's tasks
    prefer_locality: bool = True
    #: the final pick is uniform among the kept candidates (qizhi's behaviour)
    pick_at_random: bool = False
    #: how exact ties of the key are broken: "seeded" (an order of the nodes drawn from
    #: the selection seed, the default) or "node-name" (the smallest host name first, as
    #: the FGD paper's scheduler does: the tie rule is part of a policy, and a replay's
    #: report prints it); a pipeline given an order of the hosts (``tie_hosts``: a replay's
    #: with the FGD artifact's draws, its renamed nodes) uses that under either rule
    tie_rule: str = "seeded"
    #: a node's key never rises when it takes an instance, and no other node's key moves
    #: (a node key over free amounts, fuller first): the node the placement loop picks
    #: among the job's hosts stays the first until it is full, so the loop fills them in
    #: one step, in (key, tie) order (:meth:`~gangmaster.selectors.placement._Loop._fill_held`)
    key_falls_when_booked: bool = False

    def __init__(self, candidate_nodes_factor: int = 2):
        self.candidate_nodes_factor = candidate_nodes_factor

    def node_key(self, request: "SelectionRequest") -> NodeKey | None:
        """The key column for ``request`` when a node's key depends only on that node's
        state and the request's resource (not on the job's placed hosts, nor on other
        nodes); None otherwise (the default).

        With a node key the view keeps the nodes sorted by it, incrementally, and
        select() walks them best first instead of ranking every node: give one
        whenever you can. :meth:`rank` is derived from it, so the two agree."""
        return None

    def key_within_tiers(self, request: "SelectionRequest") -> NodeKey | None:
        """The node key that orders the nodes of one locality tier (the job's hosts,
        then their racks, then the rest) as :meth:`rank` does; None when there is none.

        The default is :meth:`node_key`. A strategy whose rank orders by the tier first
        and by a node key below it (``locality``, whose :meth:`node_key` is None when
        the job has hosts) returns that key whatever the hosts; a key given here for a
        request without a :meth:`node_key` promises that rank. select() then searches
        the job's hosts, their racks and the key's index in turn; the placement loop,
        which orders by tier itself, fills nodes in bulk by the key."""
        return self.node_key(request)

    def rank(self, view: "ClusterView", candidates: "npt.NDArray[np.intp]",
             request: "SelectionRequest") -> np.ndarray:
        """Sort keys for ``candidates`` (node indices), lower is better.

        The default reads the :meth:`node_key` column. Override it for the requests
        whose keys depend on more than node state (:meth:`node_key` is None for those)
        and return a numeric array of the same length."""
        key = self.node_key(request)
        if key is None:
            raise NotImplementedError(f"{type(self).__name__} must override rank() or node_key()")
        ranked: np.ndarray = key.column(view)[candidates]
        return ranked

    def observe_workload(self, shapes: "WorkloadShapes") -> None:
        """THE hook through which a strategy learns the workload it places: the typical
        task shapes and their weights (:class:`~gangmaster.selectors.workload.WorkloadShapes`).
        The replay calls it on every selector it builds, before the first job; ``--workload
        FILE`` calls it where a user gives one. The default ignores it; a strategy that
        plans for the tasks to come (``fgd``) keeps it, and refuses to rank without it."""

    def keep(self, request: "SelectionRequest", available: int) -> int:
        """How many ranked candidates to return: the role's pending tasks times
        ``candidate_nodes_factor`` (qizhi's buffer), at least one. ``available``
        bounds the answer: select() may pass the number of nodes considered, not of
        those that fit, and returns fewer when fewer fit."""
        return max(1, min(available, request.pending_tasks * self.candidate_nodes_factor))

    def choose_gpus(self, view: "ClusterView", node: int, request: "SelectionRequest") -> int:
        """The GPU mask to give on ``node``: the requested mask if one was named,
        else the lowest free bits (qizhi's choice); for a share of one GPU, the GPU
        with the least milli free that still takes it (lowest index on ties), which
        keeps whole GPUs whole. Topology-aware strategies override this."""
        resource = request.resource
        if resource.gpu_mask:
            return resource.gpu_mask
        if resource.gpu_milli:
            return 1 << tightest_gpu(view.gpu_milli_free_row(node), resource.gpu_milli)
        if not resource.gpus:
            return 0
        return lowest_bits(view.free_mask(node), resource.gpus)


def tightest_gpu(milli_free: Iterable[int], need: int) -> int:
    """The index of the GPU with the least milli free that is still >= ``need`` (the
    lowest index on ties), of ``milli_free`` (milli free per GPU: a sequence of a node's
    few GPUs, read in plain Python); raises ValueError when none has enough."""
    tightest, least = -1, None
    for gpu, free in enumerate(milli_free):
        if need <= free and (least is None or free < least):
            tightest, least = gpu, free
    if tightest < 0:
        raise ValueError(f"no GPU with {need} milli free")
    return tightest


def tenths(mvcores: np.ndarray) -> np.ndarray:
    """Milli-vcores rounded to tenths of a vcore (half up): the packing keys' vcores field."""
    return (np.asarray(mvcores, dtype=np.int64) + 50) // 100


def pack_key(*fields: tuple[int, int]) -> int:
    """:func:`pack_keys` of one node's values, in plain Python: each value with its bit
    width, most significant first, clipped into ``[0, 2**bits - 1]``."""
    key = total = 0
    for value, bits in fields:
        top = (1 << bits) - 1
        key = (key << bits) | (0 if value < 0 else top if value > top else value)
        total += bits
    if total > 63:
        raise ValueError(f"pack_key: {total} bits do not fit in an int64 key")
    return key


def pack_keys(*columns: tuple[np.ndarray, int]) -> np.ndarray:
    """Combine integer columns into one int64 key that sorts like their tuple.

    Each column comes with its bit width, most significant first; values are
    clipped into ``[0, 2**bits - 1]``. The widths must add up to at most 63.
    Faster than ``np.lexsort`` by an order of magnitude on 100,000 nodes; the columns
    are clipped and shifted as one 2-D array (few numpy calls, whatever the rows). A
    handful of changed rows is cheaper still one by one with :func:`pack_key`."""
    shifts, tops = _key_layout(tuple(bits for _, bits in columns))
    values = np.array([column for column, _ in columns], dtype=np.int64)
    np.maximum(values, 0, out=values)
    np.minimum(values, tops, out=values)
    values <<= shifts
    packed: np.ndarray = np.bitwise_or.reduce(values, axis=0)
    return packed


@lru_cache(maxsize=64)
def _key_layout(widths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per column of a packed key (a column vector each): how far it is shifted, and its
    largest value."""
    total = sum(widths)
    if total > 63:
        raise ValueError(f"pack_keys: {total} bits do not fit in an int64 key")
    shifts = np.array([sum(widths[j + 1:]) for j in range(len(widths))], dtype=np.int64)[:, None]
    tops = np.array([(1 << bits) - 1 for bits in widths], dtype=np.int64)[:, None]
    return shifts, tops


_registry: dict[str, type[Selector]] = {}
_broken: dict[str, str] = {}  # entry points that failed to load: name -> why
_entry_points_loaded = False


def register_selector(cls: type[Selector]) -> type[Selector]:
    """Register a strategy class under ``cls.name`` (usable as a decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Selector)):
        raise TypeError(f"register_selector expects a Selector subclass, got {cls!r}")
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _registry[cls.name] = cls
    return cls


@contextmanager
def selector_registered(cls: type[Selector]) -> Iterator[type[Selector]]:
    """:func:`register_selector` for the length of a ``with`` block; after it the registry
    is as it was (the name free again, or the strategy it named before back). A test's
    strategy must not outlive the test: every later list of strategies would name it."""
    _load_entry_points()   # (first: a strategy of that name from an entry point is the one to restore)
    before = _registry.get(getattr(cls, "name", ""))   # ("": never a registered name)
    register_selector(cls)
    try:
        yield cls
    finally:
        if before is None:
            del _registry[cls.name]
        else:
            _registry[cls.name] = before


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plugin must not hide the others
            _broken[ep.name] = f"{ep.value}: {type(exc).__name__}: {exc}"
            continue
        if not (isinstance(cls, type) and issubclass(cls, Selector)):
            _broken[ep.name] = f"{ep.value}: not a Selector subclass"
            continue
        if not cls.name:
            cls.name = ep.name
        _registry.setdefault(ep.name, cls)


def selector_classes() -> dict[str, type[Selector]]:
    """Every registered strategy by name, entry points included, sorted by name."""
    _load_entry_points()
    return dict(sorted(_registry.items()))


def broken_selectors() -> dict[str, str]:
    """Entry points that are registered but failed to load, with the reason."""
    _load_entry_points()
    return dict(_broken)


def get_selector(name: str, candidate_nodes_factor: int = 2) -> Selector:
    classes = selector_classes()
    if name in _broken:
        raise UnknownSelector(name, list(classes), f"its plugin failed to load ({_broken[name]})")
    if name not in classes:
        raise UnknownSelector(name, list(classes))
    return classes[name](candidate_nodes_factor=candidate_nodes_factor)
