"""The cluster a trace is replayed on (the engine's part of it: replay-io's module adds
presets, cluster files, ``--nodes``/``--infer``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from gangmaster.selectors.cluster import NodeSpec


@dataclass(frozen=True)
class ReplayCluster:
    """The nodes of a replay; ``queue_hosts``, when set, gives each queue its own nodes
    (isolated queues, as Helios replays each Philly VC on its own nodes): a job of queue
    Q may only use ``queue_hosts[Q]``. ``source`` cites where a preset's numbers come from."""

    name: str
    specs: tuple[NodeSpec, ...]
    queue_hosts: Mapping[str, tuple[str, ...]] | None = None
    source: str = ""

    @property
    def capacity_gpus(self) -> int:
        return sum(spec.gpus for spec in self.specs)
