"""`gangmaster rm serve`'s RM (a LiveRM behind its gRPC server, in this process) plans and
preempts for the gangs its AMs declare over gRPC, as the in-process RM does for its own:
a reserving queue holds nodes for a waiting gang, and with the preemption monitor on a
higher-priority gang that waits for room preempts the gang in its way (before: the gang
and the duration were not in the gRPC submission, and the served RM ran no monitor)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.protocol.rm_protocol import (AllocateRequest, ApplicationSubmission, GangRole, HeldReservation,
                                             ReservedNode, ResourceRequest)
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.rm_cmd import serve_settings
from gangmaster.tools.rmsim.queues import Queue
from gangmaster.tools.rmsim.server import LiveRM, start_server

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
#: fixtures/rm/cluster.yaml's two dgx nodes, whole: 2 x 8 GPUs
TWO_DGX = (GangRole("worker", 2, gpus=8, vcores=1, memory_mb=1024),)
ONE_DGX = (GangRole("worker", 1, gpus=8, vcores=1, memory_mb=1024),)


@pytest.fixture
def served(tmp_path):
    """``served(policy, preemption_grace_s=None) -> (client, live)``: a live RM on
    fixtures/rm/cluster.yaml with one queue of ``policy``, its monitor on with that grace
    (None: off), behind a gRPC server; stopped after the test."""
    started = []

    def serve(policy: str = "fifo", preemption_grace_s: float | None = None):
        live = LiveRM(load_cluster_specs(FIX / "cluster.yaml"), [Queue("default", policy=policy)],
                      work_dir=tmp_path / "tasks", poll_s=0.02)
        if preemption_grace_s is not None:
            live.monitor_preemption(preemption_grace_s, SelectionSettings())
        server, port = start_server(live)
        client = GrpcRMClient(f"127.0.0.1:{port}", timeout_s=10)
        started.append((client, server, live))
        return client, live

    yield serve
    for client, server, live in started:
        client.close()
        server.stop(0)
        live.stop()


def holding(rm, name: str, hosts: tuple[str, ...], priority: int = 0, duration_s: float | None = None) -> str:
    """An application that declared one 8-GPU instance per host and holds them, pinned."""
    app = rm.submit(ApplicationSubmission(name, priority=priority, expected_duration_s=duration_s,
                                          gang=(GangRole("worker", len(hosts), gpus=8, vcores=1, memory_mb=1024),)))
    rm.register(app)
    asks = tuple(ResourceRequest(k, R(1024, 1, gpus=8), host=host, relax_locality=False)
                 for k, host in enumerate(hosts, start=1))
    assert len(rm.allocate(AllocateRequest(app, 1, asks=asks)).allocated) == len(hosts)
    return app


def test_a_reserving_queue_holds_nodes_for_a_gang_declared_over_grpc(served):
    """The gang and its duration come over gRPC: the waiting gang gets dgx-000 and dgx-001 from
    when the job holding dgx-000 is declared to end, and another job's ask there, declared to
    run past that, waits with the reservation as its reason."""
    rm, live = served("reserve")
    holding(rm, "running", ("dgx-000",), duration_s=100.0)
    gang = rm.submit(ApplicationSubmission("gang", gang=TWO_DGX, expected_duration_s=50.0))
    assert live.core.apps[gang].roles == TWO_DGX and live.core.apps[gang].expected_s == 50.0
    rm.register(gang)
    late = rm.submit(ApplicationSubmission("late", expected_duration_s=1000.0))
    rm.register(late)
    answer = rm.allocate(AllocateRequest(late, 1, asks=(   # an ask: a pass plans, then grants
        ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-001", relax_locality=False),)))
    assert not answer.allocated and "dgx-001 is reserved for gang" in str(answer.pending[0].reason)
    held = live.core.reservations.reserved_for(gang)
    assert held is not None and sorted(held.gpus_by_host) == ["dgx-000", "dgx-001"]
    assert held.start_s == pytest.approx(live.core.apps[gang].submitted_at + 100.0, abs=5.0)
    # its AM is told both nodes are closed to it from the gang's start (so it places elsewhere)
    assert answer.reserved == (ReservedNode("dgx-000", held.start_s), ReservedNode("dgx-001", held.start_s))
    soon = rm.submit(ApplicationSubmission("soon", expected_duration_s=10.0))   # ends before: told nothing
    rm.register(soon)
    answer = rm.allocate(AllocateRequest(soon, 1, asks=(
        ResourceRequest(1, R(1024, 1, gpus=2), host="dgx-001", relax_locality=False),)))
    assert len(answer.allocated) == 1 and answer.reserved == ()
    own = rm.allocate(AllocateRequest(gang, 1))   # its own reservation is not closed to it; it is told it
    assert own.reserved == ()
    assert own.reservation == HeldReservation(pytest.approx(held.start_s - live.core.clock.now(), abs=1.0), 50.0,
                                              (("dgx-000", 8), ("dgx-001", 8)), ("running",), "declared")
    assert answer.reservation is None


def test_a_higher_priority_gang_declared_over_grpc_preempts_the_gang_in_its_way(served):
    """With the monitor on, the urgent gang's heartbeat preempts the low-priority gang holding
    both dgx nodes, whole, with the grace; the low gang's AM hears it in its next answer; its
    asks are held back until the urgent gang starts, or ends without starting."""
    rm, live = served("fifo", preemption_grace_s=30.0)
    low = holding(rm, "low", ("dgx-000", "dgx-001"))
    urgent = rm.submit(ApplicationSubmission("urgent", priority=5, gang=TWO_DGX))
    rm.register(urgent)
    rm.allocate(AllocateRequest(urgent, 1))
    notice = rm.allocate(AllocateRequest(low, 1)).preemption
    assert notice is not None and len(notice.containers) == 2 and "for " + urgent in str(notice.reason)
    assert notice.deadline == pytest.approx(live.core.clock.now() + 30.0, abs=5.0)
    assert live.core.scheduler.yielding == {low}
    rm.kill(urgent, "changed its mind")   # it ends before it starts: the low gang may ask again
    assert live.core.scheduler.yielding == set()


@pytest.mark.parametrize("priority, gang, preempted", [
    (0, TWO_DGX, False),     # not of higher priority
    (5, ONE_DGX, False),     # fits on what is free (pcie nodes cannot hold 8 GPUs: dgx-001 is free)
    (5, TWO_DGX, True),
])
def test_the_served_monitor_preempts_only_for_a_higher_priority_gang_without_room(served, priority, gang,
                                                                                     preempted):
    rm, live = served("fifo", preemption_grace_s=30.0)
    low = holding(rm, "low", ("dgx-000",))
    waiting = rm.submit(ApplicationSubmission("waiting", priority=priority, gang=gang))
    rm.register(waiting)
    rm.allocate(AllocateRequest(waiting, 1))
    assert (rm.allocate(AllocateRequest(low, 1)).preemption is not None) is preempted


@pytest.mark.parametrize("config, monitor", [
    ("rm: {preemption: true, preemption_grace_s: 5}\n", True),
    ("rm: {preemption: false}\n", False),
])
def test_rm_serve_turns_the_monitor_on_from_its_config(tmp_path, config, monitor):
    path = tmp_path / "config.yaml"
    path.write_text(config)
    knobs, selection = serve_settings(str(path))
    assert (selection is not None) is monitor
    if monitor:
        assert knobs.preemption_grace_s == 5 and selection == SelectionSettings.load(None)


def test_a_bad_selection_setting_is_refused_before_rm_serve_starts(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("rm: {preemption: true}\nselection: {selector: nosuch}\n")
    with pytest.raises(ConfigError, match=r"config.yaml.*selection.selector.*nosuch"):
        serve_settings(str(path))
