"""The AM reacts to events instead of re-examining everything each heartbeat: its view
of the cluster is read once and then kept from the RM's node updates, a gang that does
not fit is placed again only when something could let it fit, and each AM's selection
is seeded from its application id. Measured by behaviour (placement calls, RM calls),
never by timing."""
from functools import partial
from pathlib import Path

import pytest

import gangmaster.am.core.am_placement as am_placement
from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.am.core.am_placement import pipeline_seed
from gangmaster.am.core.master import ApplicationMaster
from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ResourceRequest
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.simulation import Simulation
from job_texts import one_role_job

PORTS = PortRanges.parse("20000-20999")


def gpu_nodes(n: int, gpus: int = 4) -> list[NodeSpec]:
    return [NodeSpec(f"n{i}", f"rack-{i % 2}", frozenset(), "V100", None, 65536, 16, gpus, PORTS) for i in range(n)]


#: the tests' job: one role of 4-GPU instances lasting 10 s unless told
job = partial(one_role_job, instances=2, gpus=4, duration=10)


@pytest.fixture
def placements(monkeypatch):
    """Every placement the AM makes, counted through a wrapped placer."""
    calls = []

    def counting(view, roles, pipeline, indices=None):
        calls.append(indices)
        return place_gang(view, roles, pipeline, indices=indices)

    place_gang = am_placement.place_gang
    monkeypatch.setattr(am_placement, "place_gang", counting)
    return calls


def blocker(sim, hosts) -> tuple[str, int, list[str]]:
    """Another application holding every GPU of ``hosts``; returns its containers."""
    app = sim.client.submit(ApplicationSubmission("blocker"))
    attempt = sim.client.register(app).attempt
    asks = tuple(ResourceRequest(k + 1, R(1024, 1, gpus=4), host=h, relax_locality=False) for k, h in enumerate(hosts))
    granted = sim.client.allocate(AllocateRequest(app, attempt, asks=asks)).allocated
    return app, attempt, [c.container_id for c in granted]


def start_am(sim, text, work_dir, **kw) -> ApplicationMaster:
    spec = parse_job(text)
    sim.workload.add_job(spec)
    app = sim.client.submit(ApplicationSubmission("ours"))
    am = ApplicationMaster(spec, sim.client, app, sim.now, work_dir, barrier=sim.barrier, **kw)
    sim.every(1.0, am.heartbeat)
    return am


def test_a_stuck_gang_is_placed_again_only_when_the_cluster_grows(tmp_path, placements):
    sim = Simulation(gpu_nodes(3))
    reads = []
    cluster_nodes = sim.client.cluster_nodes
    sim.client.cluster_nodes = lambda *a, **k: reads.append(1) or cluster_nodes(*a, **k)
    other, attempt, (on_n0, on_n1, _on_n2) = blocker(sim, ["n0", "n1", "n2"])
    am = start_am(sim, job(instances=2), tmp_path)
    sim.run_until(3600)                                    # an hour of heartbeats, nothing changes
    assert not am.done and "found no node" in am.why_waiting()["worker"]
    assert len(placements) == 1

    sim.core.mark_unhealthy("n2", "blacklisted")            # a change, but no more room anywhere
    sim.run_until(3700)
    assert len(placements) == 1

    sim.client.allocate(AllocateRequest(other, attempt, releases=(on_n0,)))   # room for one instance
    sim.run_until(3800)
    assert len(placements) == 2 and not am.done           # placed again once: one of two fits

    sim.client.allocate(AllocateRequest(other, attempt, releases=(on_n1,)))
    sim.run_until(3900)
    assert len(placements) == 3
    assert am.outcome == "succeeded"
    assert {t.host for t in am.history()[-1].tasks} == {"n0", "n1"}
    assert len(reads) == 1                                  # the cluster was read once, then kept from updates
    sim.core.check_invariants()


def test_what_other_applications_take_and_free_is_seen_by_the_next_placement(tmp_path, placements):
    # While our gang waits, the blocker frees n0 and n1 and a third application takes
    # n0 at once: the node updates say so, and our gang goes to n1 without asking for n0.
    sim = Simulation(gpu_nodes(3))
    other, attempt, (on_n0, on_n1, _on_n2) = blocker(sim, ["n0", "n1", "n2"])
    am = start_am(sim, job(instances=1, duration=5), tmp_path)
    sim.run_until(10)
    assert len(placements) == 1 and not am.done
    sim.client.allocate(AllocateRequest(other, attempt, releases=(on_n0, on_n1)))
    blocker(sim, ["n0"])
    sim.run_until(30)
    assert am.outcome == "succeeded"
    assert [t.host for t in am.history()[-1].tasks] == ["n1"]
    assert len(placements) == 2 and am.history()[-1].reselections == 0


def test_each_application_seeds_its_own_pipelines_and_a_rerun_is_the_same(tmp_path):
    assert pipeline_seed(0, "app_0001") == pipeline_seed(0, "app_0001")
    assert len({pipeline_seed(seed, app) for seed in (0, 1) for app in ("app_0001", "app_0002")}) == 4

    def host_chosen(apps_before: int, where: Path) -> str:
        sim = Simulation(gpu_nodes(16))
        for k in range(apps_before):
            sim.client.submit(ApplicationSubmission(f"other-{k}"))
        am = start_am(sim, job(instances=1, gpus=1, duration=5), where)
        sim.run_until(30)
        assert am.outcome == "succeeded"
        return am.history()[-1].tasks[0].host

    first = host_chosen(0, tmp_path / "a")
    assert host_chosen(0, tmp_path / "b") == first          # the same application id: the same choice
    others = {host_chosen(k, tmp_path / f"other-{k}") for k in range(1, 6)}
    assert others - {first}                                  # other ids break the ties otherwise


def test_a_gang_backing_off_is_placed_again_when_its_backoff_ends(tmp_path, placements):
    # Gangs each holding part of what another needs: the partial hold is given
    # back and the gang places again after its backoff, though the cluster never grew
    # in between (its own release is what changed).
    from gangmaster.tools.job_runner import SimulatedRuns
    from gangmaster.tools.rmsim.queues import Queue

    settings = AMSettings(hold_timeout_s=60, release_backoff_s=10, max_virtual_time_s=3000)
    queues = [Queue("qa"), Queue("qb"), Queue("qc")]
    nodes = [NodeSpec(f"n{i}", "r", frozenset(), "V100", None, 65536 - 1024 * i, 16, 4, PORTS) for i in range(5)]
    runs = SimulatedRuns(nodes, settings, queues=queues, scheduling_interval_s=1.0)
    for k, name in enumerate(("a", "b", "c")):
        runs.submit(parse_job(job(name, instances=3, duration=100)), tmp_path / name, queues[k].name)
    assert runs.run()
    assert [r.outcome for r in runs.runs] == ["succeeded"] * 3
    assert sum(a.releases for r in runs.runs for a in r.am.history()) >= 1
    assert len(placements) < 40        # a handful of placements, not one per heartbeat of waiting


def test_the_view_says_when_the_cluster_grew():
    from dataclasses import replace

    from gangmaster.am.core.cluster_tracker import ClusterTracker

    sim = Simulation(gpu_nodes(2))
    tracker = ClusterTracker(sim.client.cluster_nodes)
    n0, n1 = sim.client.cluster_nodes()
    fuller = replace(n0, free=R(60000, 15, gpus=2, gpu_mask=0b0011, port_ranges=n0.free.port_ranges))
    assert not tracker.apply([fuller])                        # less room: nothing can fit that did not
    assert tracker.view.free(0).gpu_mask == 0b0011 and tracker.view.free(0).memory_mb == 60000
    assert tracker.apply([n0]) and tracker.grown == 1          # the room came back
    assert not tracker.apply([replace(n1, state=n1.state.UNHEALTHY)])
    assert tracker.apply([n1]) and tracker.grown == 2          # healthy again
    assert not tracker.apply([n1])                             # the same report again changes nothing
    assert tracker.apply([replace(n0, host="n9")])             # a node it never knew: read afresh
    assert len(tracker.view) == 2
