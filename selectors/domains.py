"""Network domains: the nested groups of nodes a gang can be kept inside.

A node sits in a rack (:attr:`NodeSpec.rack`), and a cluster may describe levels above
it — a switch, a block, a spine — each domain of a level holding whole domains of the
level below (:attr:`NodeSpec.domains`, innermost first; the cluster file checks the
nesting). A job asks for a level with a :class:`DomainAsk`: ``required`` keeps every
instance inside one domain of the level (or the gang waits), ``preferred`` spans as few
domains as it can. The gang placer chooses the domain for the whole gang
(:mod:`gangmaster.am.core.gang_domains`); this module only says which nodes form each domain.

A node that names no domain of a level (a cluster that describes no switches) is in no
domain of it: a ``required`` ask of that level never places there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .cluster import ClusterView, NodeSpec
from .identity_memo import IdentityMemo

#: the level every cluster has (a node's rack)
RACK = "rack"
#: how a gang or a role asks for a level
DOMAIN_MODES = ("required", "preferred")
#: a level's name (written in Slurm features as ``net.<level>.<name>`` and in RM node reports
#: as ``level=name``)
LEVEL_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class DomainAsk:
    """Every instance inside one domain of ``level`` (``required``), or as few domains of
    it as the placement allows (not required: preferred)."""

    level: str
    required: bool

    @property
    def mode(self) -> str:
        return DOMAIN_MODES[0] if self.required else DOMAIN_MODES[1]

    def __str__(self) -> str:
        return f"{self.mode} {self.level}"


def domain_of(spec: NodeSpec, level: str) -> str | None:
    """The name of ``spec``'s domain at ``level`` (None: the node names none there)."""
    if level == RACK:
        return spec.rack
    for named, name in spec.domains:
        if named == level:
            return name
    return None


def levels_of(specs: Iterable[NodeSpec]) -> tuple[str, ...]:
    """The levels the nodes describe, rack first, the others in the order first named."""
    levels = {RACK: None}
    for spec in specs:
        for level, _ in spec.domains:
            levels.setdefault(level, None)
    return tuple(levels)


class Domains:
    """The domains of one level over a view's nodes: their names, and per node the code
    of its domain (-1: in none)."""

    __slots__ = ("level", "names", "code", "_rows")

    def __init__(self, specs: Sequence[NodeSpec], level: str):
        self.level = level
        codes: dict[str, int] = {}
        per_node = [domain_of(spec, level) for spec in specs]
        self.code = np.array([-1 if name is None else codes.setdefault(name, len(codes)) for name in per_node],
                             dtype=np.int64)
        self.names = list(codes)
        self._rows: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def rows(self, domain: int) -> np.ndarray:
        """The nodes of ``domain``, in node order."""
        if self._rows is None:
            order = np.argsort(self.code, kind="stable")
            starts = np.searchsorted(self.code[order], np.arange(-1, len(self.names) + 1))
            self._rows = [order[starts[d + 1]:starts[d + 2]] for d in range(len(self.names))]
        return self._rows[domain]

    def sums(self, per_node: np.ndarray) -> np.ndarray:
        """``per_node`` summed over each domain's nodes."""
        inside = self.code >= 0
        return np.bincount(self.code[inside], weights=per_node[inside], minlength=len(self.names))


#: (id(specs), level) -> the Domains of that level (a view and its copies share their specs)
_domains: IdentityMemo[Domains] = IdentityMemo(64)


def domains_of(view: ClusterView, level: str) -> Domains:
    """The domains of ``level`` over ``view``'s nodes, made once per list of nodes."""
    key = (id(view.specs), level)
    found = _domains.get(key)
    if found is None:
        found = _domains.put(key, (view.specs,), Domains(view.specs, level))
    return found


def nesting_problem(specs: Sequence[NodeSpec], levels: Sequence[str]) -> str | None:
    """Why the domains of ``levels`` (innermost first, rack first) do not nest — a domain
    of one level split over two domains of the next — or None when they do."""
    for inner, outer in zip(levels, levels[1:]):
        seen: dict[str | None, str | None] = {}
        for spec in specs:
            here, above = domain_of(spec, inner), domain_of(spec, outer)
            before = seen.setdefault(here, above)
            if before != above:
                return (f"each {inner} inside one {outer}; {inner} {here!r} is in {outer} {before!r} "
                        f"and {outer} {above!r}")
    return None
