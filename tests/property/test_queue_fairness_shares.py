"""Queue fairness with shares of one GPU: queues count GPU in milli-GPU (a share its
milli, a whole GPU 1000), so queues whose apps ask shares get their guaranteed GPUs and
split freed capacity by dominant share as queues of whole GPUs do
(``tests/property/test_rm_invariants.py::test_fair_between_queues`` is the whole-GPU case)."""
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ResourceRequest
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.tools.rmsim.queues import Queue
from gangmaster.tools.rmsim.simulation import Simulation

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
SPECS = load_cluster_specs(FIX / "cluster.yaml")
CLUSTER_GPUS = sum(s.gpus for s in SPECS)      # 24


def share(milli: int) -> ResourceDescriptor:
    return ResourceDescriptor(16, 0.01, gpu_milli=milli) if milli < GPU_MILLI else ResourceDescriptor(16, 0.01, 1)


def filled_by_a_hog(queues: list[Queue]) -> tuple[Simulation, "callable"]:
    """The cluster with every GPU held whole by an app of its own unlimited queue, and a
    function that lets them all go (the scheduling pass then hands them out)."""
    sim = Simulation(SPECS, queues + [Queue("hog")])
    hog = sim.client.submit(ApplicationSubmission("hog", queue="hog"))
    sim.client.register(hog)
    held = sim.client.allocate(AllocateRequest(hog, 1, asks=(ResourceRequest(1, share(GPU_MILLI),
                                                                             count=CLUSTER_GPUS),))).allocated
    assert len(held) == CLUSTER_GPUS
    return sim, lambda: sim.client.allocate(AllocateRequest(hog, 1, releases=tuple(c.container_id for c in held)))


def ask(sim: Simulation, name: str, queue: str, milli: int, count: int) -> str:
    """An app of ``queue`` asking ``count`` shares of ``milli`` (a whole GPU for 1000)."""
    app = sim.client.submit(ApplicationSubmission(name, queue=queue))
    sim.client.register(app)
    resp = sim.client.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, share(milli), count=count),)))
    assert resp.allocated == ()
    return app


def held_by(sim: Simulation, app: str) -> int:
    return len(sim.client.allocate(AllocateRequest(app, 1)).allocated)


def test_two_queues_of_shares_get_their_guaranteed_gpus():
    """Limits of 8 and 16 GPUs on a 24-GPU cluster: once the hog lets go, the queue of
    250-milli shares holds 32 of them (8 GPUs) and the queue of 500-milli shares 32 (16 GPUs),
    each asking more than its limit."""
    small, large = Queue("small", max_gpus=8), Queue("large", max_gpus=16)
    sim, let_go = filled_by_a_hog([small, large])
    a, b = ask(sim, "a", "small", 250, 100), ask(sim, "b", "large", 500, 100)
    let_go()
    assert (held_by(sim, a), held_by(sim, b)) == (32, 32)
    assert (small.gpu_milli_used, large.gpu_milli_used) == (8 * GPU_MILLI, 16 * GPU_MILLI)
    sim.core.check_invariants()


def test_shares_and_whole_gpus_split_freed_gpus_by_dominant_share():
    """Two queues each allowed the whole cluster, one asking 250-milli shares, one whole
    GPUs: they split it evenly, 12 GPUs each (48 shares against 12 GPUs), not by count."""
    shares, wholes = Queue("shares", max_gpus=24), Queue("wholes", max_gpus=24)
    sim, let_go = filled_by_a_hog([shares, wholes])
    a, b = ask(sim, "a", "shares", 250, 200), ask(sim, "b", "wholes", GPU_MILLI, 30)
    let_go()
    assert (held_by(sim, a), held_by(sim, b)) == (48, 12)
    sim.core.check_invariants()


@settings(max_examples=40)
@given(st.lists(st.integers(1, 24), min_size=2, max_size=3), st.lists(st.integers(0, 2), min_size=1, max_size=6),
       st.sampled_from([100, 250, 333, 500, 750]))
def test_fair_between_queues_of_shares(limits, app_queues, milli):
    """Freed capacity goes to the queue with the lowest dominant share first, counted in
    milli-GPU: after the pass, two queues that both still wait (below their limit) differ
    in share by at most one share. Every app asks shares of one size, so that the
    cluster stops taking them for every queue at once (a queue of larger shares would
    stop first, where only smaller ones still fit, and owe nothing to fairness)."""
    queues = [Queue(f"q{k}", max_gpus=g) for k, g in enumerate(limits)]
    sim, let_go = filled_by_a_hog(queues)
    for k, q in enumerate(app_queues):
        ask(sim, f"a{k}", queues[q % len(queues)].name, milli, 2 * CLUSTER_GPUS * GPU_MILLI // milli)
    let_go()
    sim.core.check_invariants()
    assert all(q.gpu_milli_used <= q.max_gpus * GPU_MILLI for q in queues)
    waiting = [q for q in queues if q.apps and q.gpu_milli_used + milli <= q.max_gpus * GPU_MILLI]
    held = {q.name: q.gpu_milli_used / (q.max_gpus * GPU_MILLI) for q in queues}   # GPU is the only limit
    for a in waiting:
        for b in waiting:
            assert held[a.name] - held[b.name] <= milli / (a.max_gpus * GPU_MILLI) + 1e-9
    per_gpu = GPU_MILLI // milli        # shares one GPU takes: the cluster is full for the waiting
    assert not waiting or sum(q.gpu_milli_used for q in queues) == CLUSTER_GPUS * per_gpu * milli
