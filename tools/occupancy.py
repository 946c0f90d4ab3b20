"""What other applications hold on the simulated cluster, for a diagnosis to name the
jobs blocking a gang (:class:`~gangmaster.am.diagnosis.Occupant`).

The RM simulator knows every container; the workload model knows when each running
one exits (the simulated NodeManager's exit instant), so the expected end is exact
in virtual time. A container still waiting at its gang's barrier, or one without a
duration, has no known end.
"""
from __future__ import annotations

from gangmaster.am.diagnosis import Occupant

from .rmsim.simulation import Simulation


def simulated_occupants(sim: Simulation, except_app: str) -> list[Occupant]:
    """One :class:`Occupant` per live container of every application but ``except_app``."""
    core, now = sim.core, sim.now()
    exiting = sim.node_manager.exiting
    found = []
    for i, ids in enumerate(core.node_containers):
        host = core.ledger.hosts[i]
        for cid in sorted(ids):
            rec = core.containers[cid]
            if rec.app_id == except_app:
                continue
            app = core.apps.get(rec.app_id)
            b = rec.booking
            instant = exiting.get(cid)
            end = None if instant is None else max(0.0, instant.timer.when - now)
            found.append(Occupant(app.name if app is not None else rec.app_id, host, b.mvcores / 1000,
                                  b.memory_mb, bin(b.gpu_mask).count("1"), end))
    return found
