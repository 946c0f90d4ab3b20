"""The pattern the AM follows in simulation: a single-threaded AM written only
against RMClient, called on the virtual clock by the driver, restarted by the driver
when the RM reports its attempt failed. Nothing sleeps; the run is reproducible."""
from pathlib import Path

from gangmaster.protocol.rm_client import RMClient
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, ApplicationSubmission, AppState, ContainerState, LaunchContext, ResourceRequest, WrongState,
)
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.scenario import Scenario
from gangmaster.tools.rmsim.simulation import Simulation
from gangmaster.tools.rmsim.workload import raw_task_env

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


class ToyGangAM:
    """Asks for a gang of `size` 2-GPU containers, starts none until all are granted, then
    starts all; finishes when every task completed. Survives its own restart."""

    def __init__(self, rm: RMClient, app_id: str, size: int, now):
        self.rm, self.app_id, self.size, self.now = rm, app_id, size, now
        reg = rm.register(app_id)
        self.attempt = reg.attempt
        self.held = {c.container_id: c for c in reg.containers_from_previous_attempts}
        self.started = set(self.held)          # kept containers were running already
        self.done: dict[str, int] = {}
        self.asked = bool(self.held)
        self.log: list[str] = []

    def heartbeat(self) -> None:
        asks = ()
        if not self.asked:
            asks = (ResourceRequest(1, R(1024, 1, gpus=2), count=self.size),)
            self.asked = True
        try:
            resp = self.rm.allocate(AllocateRequest(self.app_id, self.attempt, asks=asks))
        except WrongState:
            return                              # this attempt is over; the driver starts another
        for c in resp.allocated:
            self.held[c.container_id] = c
        for s in resp.completed:
            self.done[s.container_id] = s.exit_status
        if len(self.held) == self.size and not self.started:
            for cid in sorted(self.held):
                self.rm.start_container(cid, LaunchContext.of(["train"], env={"RANK": cid, **raw_task_env(10)}))
            self.started = set(self.held)
            self.log.append(f"{self.now():g}: gang of {self.size} started")
        if self.started and len(self.done) == self.size:
            self.rm.finish(self.app_id, self.attempt, "SUCCEEDED")
            self.log.append(f"{self.now():g}: finished")


def run(kill_am_at=None):
    sim = Simulation(load_cluster_specs(FIX / "cluster.yaml"))
    app = sim.client.submit(ApplicationSubmission("gang", keep_containers_across_attempts=True))
    ams = []

    def start_am():
        am = ToyGangAM(sim.client, app, 6, sim.now)
        ams.append(am)
        sim.every(1.0, am.heartbeat)

    sim.on("attempt_failed", lambda event: sim.call_later(2.0, start_am))   # the AM process restarts in 2 s
    start_am()
    if kill_am_at is not None:
        Scenario.parse(f"events: [{{at: {kill_am_at}, do: kill_am, app: {app}}}]").schedule(sim.core)
    sim.run_until(60)
    return sim, app, ams


def test_gang_starts_together_and_finishes():
    sim, app, (am,) = run()
    assert am.log == ["1: gang of 6 started", "11: finished"]
    assert sim.client.application_report(app).state is AppState.FINISHED
    assert all(code == 0 for code in am.done.values())


def test_am_killed_mid_run_is_restarted_and_recovers_its_containers():
    sim, app, ams = run(kill_am_at=5)
    first, second = ams
    assert second.attempt == 2 and set(second.held) == set(first.held)   # containers kept across attempts
    assert first.log == ["1: gang of 6 started"] and second.log == ["11: finished"]
    assert sim.client.application_report(app).state is AppState.FINISHED
    assert all(sim.client.container_status(c).state is ContainerState.COMPLETED for c in first.held)


def test_reproducible():
    a = run(kill_am_at=5)[2][1].log
    b = run(kill_am_at=5)[2][1].log
    assert a == b
