"""What other applications hold on an in-process RM, for a diagnosis to name the jobs
blocking a gang (:class:`~gangmaster.am.ops.diagnosis.Occupant`).

The RM core knows every container. In virtual time the workload model also knows when
each running one exits (the simulated NodeManager's exit instant), so the expected end
is exact; a container still waiting at its gang's barrier, one without a duration, and
every live process have no known end.
"""
from __future__ import annotations

from typing import Callable

from gangmaster.am.ops.diagnosis import Occupant

from .rmsim.core import ResourceManager
from .rmsim.simulation import Simulation


def rm_occupants(core: ResourceManager, except_app: str,
                 ends_in: Callable[[str], float | None] = lambda container_id: None) -> list[Occupant]:
    """One :class:`Occupant` per live container of every application but ``except_app``;
    ``ends_in(container_id)``: seconds until it is expected to end (None: unknown)."""
    found = []
    for i, ids in enumerate(core.node_containers):
        host = core.ledger.hosts[i]
        for cid in sorted(ids):
            rec = core.containers[cid]
            if rec.app_id == except_app:
                continue
            app = core.apps.get(rec.app_id)
            b = rec.booking
            share = ((b.gpu_mask.bit_length() - 1, b.gpu_milli),) if b.gpu_milli else ()
            found.append(Occupant(app.name if app is not None else rec.app_id, host, b.mvcores / 1000,
                                  b.memory_mb, 0 if share else bin(b.gpu_mask).count("1"), ends_in(cid), share,
                                  app.priority if app is not None else 0))
    return found


def simulated_occupants(sim: Simulation, except_app: str) -> list[Occupant]:
    """:func:`rm_occupants` of a simulation, each with its exit time when the workload model set one."""
    now, exiting = sim.now(), sim.node_manager.exiting

    def ends_in(container_id: str) -> float | None:
        instant = exiting.get(container_id)
        return None if instant is None else max(0.0, instant.timer[0] - now)

    return rm_occupants(sim.core, except_app, ends_in)
