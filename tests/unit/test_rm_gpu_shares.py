"""Shares of one GPU (``gpu_milli``) in the RM: where they are booked, what they leave for
whole-GPU asks, how queues count them, and what the node and application reports say."""
from pathlib import Path

import pytest

from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ResourceRequest
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.queues import Queue
from gangmaster.tools.rmsim.simulation import Simulation

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
SPECS = load_cluster_specs(FIX / "cluster.yaml")   # dgx-000/001: 8 GPUs; pcie-000/001: 4; cpu-000: none


def share(milli, gpu=None, memory_mb=512):
    return R(memory_mb, 0.5, gpu_mask=0 if gpu is None else 1 << gpu, gpu_milli=milli)


def start(sim, queue="default"):
    app = sim.client.submit(ApplicationSubmission("p", queue=queue))
    sim.client.register(app)
    return app


def ask(sim, app, *requests, releases=()):
    return sim.client.allocate(AllocateRequest(app, 1, asks=tuple(requests), releases=tuple(releases)))


def on(host, rid, resource, count=1):
    return ResourceRequest(rid, resource, count, host=host, relax_locality=False)


def node(sim, host):
    return {n.host: n for n in sim.client.cluster_nodes()}[host]


def test_shares_fill_the_tightest_gpu_and_whole_gpus_stay_whole():
    """Five shares of 250 on a 4-GPU node: four fill GPU 0 (the tightest fit each time), the
    fifth starts GPU 1; a whole-GPU ask then gets the two GPUs no share touched."""
    sim = Simulation(SPECS)
    app = start(sim)
    granted = ask(sim, app, on("pcie-000", 1, share(250), count=5)).allocated
    assert [c.resource.gpu_mask for c in granted] == [0b1] * 4 + [0b10]
    assert all(c.resource.gpu_milli == 250 and c.resource.gpus == 0 for c in granted)
    report = node(sim, "pcie-000")
    assert report.gpu_milli_free == (0, 750, 1000, 1000) and report.free.gpu_mask == 0b1100
    whole = ask(sim, app, on("pcie-000", 2, R(512, 1, gpus=2))).allocated
    assert [c.resource.gpu_mask for c in whole] == [0b1100]
    more = ask(sim, app, on("pcie-000", 3, R(512, 1, gpus=1)))
    assert more.allocated == () and "GPUs free 0 < 1 asked" in str(more.pending[0].reason)   # no whole GPU left
    sim.core.check_invariants()


def test_a_share_naming_its_gpu_gets_it_or_waits_saying_how_much_is_free():
    sim = Simulation(SPECS)
    app = start(sim)
    (first,) = ask(sim, app, on("pcie-000", 1, share(700, gpu=2))).allocated
    assert first.resource.gpu_mask == 0b100
    waits = ask(sim, app, on("pcie-000", 2, share(400, gpu=2)))
    assert waits.allocated == ()
    assert "pcie-000: GPU 2 has 300 milli free, 400 asked" in str(waits.pending[0].reason)
    (fits,) = ask(sim, app, on("pcie-000", 3, share(300, gpu=2))).allocated
    assert fits.resource.gpu_mask == 0b100 and node(sim, "pcie-000").gpu_milli_free == (1000, 1000, 0, 1000)
    sim.core.check_invariants()


def test_a_gpu_taken_whole_takes_no_share_and_a_shared_gpu_goes_back_whole_when_its_shares_end():
    sim = Simulation(SPECS)
    app = start(sim)
    (whole,) = ask(sim, app, on("pcie-001", 1, R(512, 1, gpu_mask=0b1))).allocated
    assert ask(sim, app, on("pcie-001", 2, share(1, gpu=0))).allocated == ()
    shares = ask(sim, app, on("pcie-001", 3, share(500), count=2)).allocated
    assert [c.resource.gpu_mask for c in shares] == [0b10, 0b10]   # the tightest fit that takes them
    ask(sim, app, releases=[c.container_id for c in shares] + [whole.container_id])
    report = node(sim, "pcie-001")
    # the share pinned to GPU 0 waited for it: now GPU 0 holds it, the rest are whole again
    assert report.gpu_milli_free == (999, 1000, 1000, 1000) and report.free.gpu_mask == 0b1110
    sim.core.check_invariants()


def test_a_share_that_can_never_fit_is_rejected_with_the_reason():
    sim = Simulation(SPECS)
    app = start(sim)
    resp = ask(sim, app, on("cpu-000", 1, share(100)), on("pcie-000", 2, share(100, gpu=6)))
    reasons = {j.request_id: str(j.reason) for j in resp.rejected}
    assert reasons == {1: "host cpu-000 has 0 GPU(s), no GPU to share for a share of 100 milli",
                       2: "host pcie-000 has 4 GPU(s), GPU 6 named for a share of 100 milli"}


def test_a_queue_counts_gpu_in_milli_four_quarter_shares_are_one_gpu_of_its_limit():
    sim = Simulation(SPECS, [Queue("small", max_gpus=1), Queue("other")])
    app = start(sim, "small")
    assert len(ask(sim, app, ResourceRequest(1, share(250), 4)).allocated) == 4
    queue = sim.core.queues["small"]
    assert (queue.used_gpus, queue.used_gpu_milli, queue.gpu_milli_used, queue.share()) == (0, 1000, 1000, 1.0)
    full = ask(sim, app, ResourceRequest(2, share(1)), ResourceRequest(3, R(512, 1, gpus=1)))
    assert full.allocated == () and all("queue small limit reached" in str(p.reason) for p in full.pending)
    never = ask(sim, app, ResourceRequest(4, R(512, 1, gpus=2)))
    assert str(never.rejected[0].reason) == "queue small is limited to 1 GPU(s), 2 asked"
    assert sim.client.application_report(app).gpu_milli_used == 1000
    assert sim.client.application_report(app).used.gpus == 0
    sim.core.check_invariants()


def test_headroom_counts_whole_gpus_left_after_shares():
    """The headroom is in whole GPUs: what the queue's room and the cluster's free milli hold."""
    sim = Simulation(SPECS, [Queue("q", max_gpus=3)])
    app = start(sim, "q")
    resp = ask(sim, app, ResourceRequest(1, share(600)))
    assert resp.headroom.gpus == 2   # 3000 − 600 milli of the queue: two whole GPUs more


@pytest.mark.parametrize("milli", [1, 999])
def test_free_plus_used_is_1000_per_gpu(milli):
    sim = Simulation(SPECS)
    app = start(sim)
    ask(sim, app, on("dgx-000", 1, share(milli), count=3))
    ledger = sim.core.ledger
    i = ledger.host_index["dgx-000"]
    assert ((ledger.gpu_milli_free_rows([i])[0] + ledger.used_milli(i)) == 1000).all()
    sim.core.check_invariants()


def test_the_invariant_check_sees_a_share_ledger_that_drifts_from_the_containers():
    """The recount is a real check: a ledger off by one milli, or a queue that forgot a share,
    is caught."""
    sim = Simulation(SPECS)
    app = start(sim)
    ask(sim, app, on("pcie-000", 1, share(250)))
    sim.core.check_invariants()
    ledger = sim.core.ledger
    i = ledger.host_index["pcie-000"]
    ledger.gpu_share_used[i, 0] += 1
    with pytest.raises(AssertionError, match="pcie-000: share ledger"):
        sim.core.check_invariants()
    ledger.gpu_share_used[i, 0] -= 1
    sim.core.queues["default"].used_gpu_milli -= 250
    with pytest.raises(AssertionError, match="queue default: GPU share drift"):
        sim.core.check_invariants()


def test_a_nodes_milli_free_for_its_report_is_the_rows_view_of_one_node():
    """The report's per-GPU milli free (worked out in plain Python for one node) is what the
    columns' vector form gives for that node: shares, whole GPUs taken, GPUs wholly free."""
    sim = Simulation(SPECS, [Queue("default")])
    app = start(sim)
    ask(sim, app, on("pcie-000", 1, share(250, gpu=1)), on("pcie-000", 2, share(600, gpu=1)),
        on("pcie-000", 3, R(512, 0.5, gpu_mask=0b1000)))
    ledger = sim.core.ledger
    for i, host in enumerate(ledger.hosts):
        rows = tuple(ledger.gpu_milli_free_rows([i])[0][:ledger.gpu_capacity.item(i)].tolist())
        assert ledger.gpu_milli_free_of(i) == rows, host
    assert node(sim, "pcie-000").gpu_milli_free == (1000, 150, 1000, 0)
