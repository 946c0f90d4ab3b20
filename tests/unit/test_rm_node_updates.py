"""What the RM's allocate responses carry in ``node_updates``: every node whose usage,
health or containers changed since that application's previous response, each once,
oldest change first, at most RM_MAX_NODE_UPDATES at a time — and nothing on a quiet
heartbeat (tools/rmsim/node_changes.py)."""
from pathlib import Path

from hypothesis import given, settings, strategies as st

from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, NodeState, ResourceRequest
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim import state
from gangmaster.tools.rmsim.clock import VirtualLoop
from gangmaster.tools.rmsim.node_changes import MIN_LOG_ENTRIES, NodeChanges
from gangmaster.tools.rmsim.nodemanager import SimulatedNodeManager
from gangmaster.tools.rmsim.simulation import Simulation

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def start_app(sim, name):
    app = sim.client.submit(ApplicationSubmission(name))
    return app, sim.client.register(app).attempt


def beat(sim, app, attempt, *asks, **kw):
    return sim.client.allocate(AllocateRequest(app, attempt, asks=tuple(asks), **kw))


def test_another_applications_grant_and_release_reach_every_am_once():
    sim = Simulation.from_files(FIX / "cluster.yaml")
    a, att_a = start_app(sim, "a")
    b, att_b = start_app(sim, "b")
    assert beat(sim, b, att_b).node_updates == ()          # nothing changed since b registered
    won = beat(sim, a, att_a, ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False))
    (c,) = won.allocated
    (mine,) = won.node_updates                               # a hears of its own grant too
    assert mine.host == "dgx-000" and mine.free.gpus == 0 and mine.containers == 1
    (seen,) = beat(sim, b, att_b).node_updates
    assert (seen.host, seen.free.gpus, seen.free.memory_mb) == ("dgx-000", 0, 65536 - 1024)
    assert beat(sim, b, att_b).node_updates == ()           # told once
    beat(sim, a, att_a, releases=(c.container_id,))
    (freed,) = beat(sim, b, att_b).node_updates
    assert freed.host == "dgx-000" and freed.free.gpus == 8 and freed.containers == 0


def test_health_changes_are_node_updates():
    sim = Simulation.from_files(FIX / "cluster.yaml")
    app, att = start_app(sim, "a")
    sim.core.mark_unhealthy("pcie-000", "disk full")
    sim.core.lose_node("dgx-001", "power")
    updates = {n.host: n for n in beat(sim, app, att).node_updates}
    assert updates.keys() == {"pcie-000", "dgx-001"}
    assert updates["pcie-000"].state is NodeState.UNHEALTHY and updates["dgx-001"].state is NodeState.LOST


def test_a_state_file_keeps_what_each_am_has_not_heard_yet(tmp_path):
    sim = Simulation.from_files(FIX / "cluster.yaml")
    a, att_a = start_app(sim, "a")
    b, att_b = start_app(sim, "b")
    beat(sim, a, att_a, ResourceRequest(1, R(1024, 1, gpus=2), host="pcie-000", relax_locality=False))
    path = tmp_path / "state.json"
    state.save(sim.core, path)
    loop = VirtualLoop(start=sim.now())
    restored = state.load(path, loop, SimulatedNodeManager(loop))
    assert [n.host for n in restored.allocate(AllocateRequest(b, att_b)).node_updates] == ["pcie-000"]
    assert restored.allocate(AllocateRequest(a, att_a)).node_updates == ()


# ------------------------------------------------------------------ NodeChanges itself
def reference(history: list[int], cursor: int, limit: int) -> tuple[list[int], int]:
    """Nodes whose latest change is after ``cursor``, by that change, at most ``limit``."""
    latest = {node: seq for seq, node in enumerate(history, start=1)}
    changed = sorted((seq, node) for node, seq in latest.items() if seq > cursor)
    return [node for _, node in changed[:limit]], len(history)


@settings(max_examples=60)
@given(nodes=st.integers(1, 64), touches=st.lists(st.integers(0, 63), max_size=3 * MIN_LOG_ENTRIES),
       cursor_at=st.floats(0, 1), limit=st.integers(1, 9))
def test_changes_since_a_cursor_match_the_reference(nodes, touches, cursor_at, limit):
    touches = [t % nodes for t in touches]
    changes = NodeChanges(nodes)
    for node in touches:
        changes.touch(node)
    cursor = int(cursor_at * len(touches))
    assert changes.since(cursor, limit)[0] == reference(touches, cursor, limit)[0]
    # reading page by page gives every changed node once
    seen, at = [], cursor
    while True:
        page, at = changes.since(at, limit)
        if not page:
            break
        seen += page
    assert seen == reference(touches, cursor, 10 ** 9)[0] and at == len(touches)


def test_the_log_stays_bounded():
    changes = NodeChanges(4)
    for k in range(10 * MIN_LOG_ENTRIES):
        changes.touch(k % 4)
    assert len(changes.log) <= max(MIN_LOG_ENTRIES, 8)
    assert changes.since(0, 100) == ([0, 1, 2, 3], changes.seq)   # an old cursor: answered from the column


def test_an_unused_nodes_report_follows_its_state_and_health():
    """An unused node is reported alike each time it is unused in the same state; a change
    of state or health report, or a container on it, shows at once."""
    sim = Simulation.from_files(FIX / "cluster.yaml")
    core = sim.core
    host = core.ledger.hosts[0]
    first = core.cluster_nodes()[0]
    assert (first.state, first.health_report, first.containers, first.free) == \
           (NodeState.RUNNING, "", 0, first.capacity)
    core.mark_unhealthy(host, "disk full")
    assert (core.cluster_nodes()[0].state, core.cluster_nodes()[0].health_report) == (NodeState.UNHEALTHY, "disk full")
    core.restore_node(host)
    assert core.cluster_nodes()[0] == first
    app, attempt = start_app(sim, "a")
    granted = beat(sim, app, attempt, ResourceRequest(1, R(memory_mb=1024, vcores=1), host=host,
                                                      relax_locality=False)).allocated
    used = core.cluster_nodes()[0]
    assert used.containers == 1 and used.free.memory_mb == first.free.memory_mb - 1024
    beat(sim, app, attempt, releases=(granted[0].container_id,))
    assert core.cluster_nodes()[0] == first


def test_an_rm_without_node_updates_records_changes_from_a_drivers_first_ask():
    """Without node updates nobody reads the changes until a driver asks for its first
    cursor: from then on every change is reported to it, as with node updates."""
    sim = Simulation(load_cluster_specs(FIX / "cluster.yaml"), node_updates=False)
    core = sim.core
    hosts = core.ledger.hosts
    core.mark_unhealthy(hosts[0], "disk full")   # before any reader: nobody hears of it
    assert core.node_changes.seq == 0
    reports, cursor = core.changed_nodes(None)
    assert reports == []
    core.mark_unhealthy(hosts[1], "disk full")
    reports, cursor = core.changed_nodes(cursor)
    assert [r.host for r in reports] == [hosts[1]]
    assert core.changed_nodes(cursor) == ([], cursor)
