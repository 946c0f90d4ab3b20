"""Property tests of the RM core: whatever AMs and faults do, the RM never
double-books a GPU, port, byte of memory or vcore (free + used == capacity on
every node, queue usage equals its containers and stays within the limit), never
shares a GPU past 1000 milli or a GPU taken whole (free + used == 1000 per GPU), and
a run is a pure function of its inputs."""
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.am.core.cluster_tracker import ClusterTracker
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, ApplicationSubmission, AppState, InvalidRequest, LaunchContext, ResourceRequest, RMError,
)
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.tools.rmsim.queues import Queue
from gangmaster.tools.rmsim.simulation import Simulation
from gangmaster.tools.rmsim.state import snapshot
from gangmaster.tools.rmsim.workload import raw_task_env

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
SPECS = load_cluster_specs(FIX / "cluster.yaml")
HOSTS = [s.host for s in SPECS]
RACKS = sorted({s.rack for s in SPECS})

resources = st.builds(
    lambda mem, vc, gpus, mask, ports, explicit: ResourceDescriptor(
        mem, vc, 0 if mask else gpus, mask,
        0 if explicit else ports,
        PortRanges.of((20000 + explicit[0], 20000 + explicit[0] + explicit[1])) if explicit else PortRanges()),
    st.sampled_from([0, 512, 512, 4096, 30000, 70000]),
    st.sampled_from([0.0, 0.5, 0.5, 1.0, 3.3, 20.0]),
    st.sampled_from([0, 0, 1, 1, 2, 4, 8, 9]),
    st.sampled_from([0, 0, 0, 1, 0b11, 0b1100, 0xF0, 0x80, 0x1FF]),
    st.sampled_from([0, 0, 0, 1, 4]),
    st.one_of(st.none(), st.none(), st.none(), st.tuples(st.integers(0, 9), st.integers(0, 2))),
)

#: shares of one GPU: the GPU left to the RM (tightest fit) or named, sometimes one the node lacks
shares = st.builds(
    lambda mem, vc, milli, gpu: ResourceDescriptor(mem, vc, gpu_mask=0 if gpu is None else 1 << gpu, gpu_milli=milli),
    st.sampled_from([0, 512, 4096]),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.sampled_from([1, 100, 250, 250, 333, 500, 750, 999]),
    st.one_of(st.none(), st.none(), st.integers(0, 8)),
)

asks = st.builds(
    lambda r, host, rack, relax, count: (r, host, rack, relax, count),
    st.one_of(resources, resources, shares), st.one_of(st.none(), st.sampled_from(HOSTS)), st.one_of(st.none(), st.sampled_from(RACKS)),
    st.booleans(), st.integers(1, 4))

ask_op = st.tuples(st.just("ask"), st.integers(0, 5), st.lists(asks, min_size=1, max_size=4))
ops = st.one_of(
    ask_op, ask_op, ask_op,
    st.tuples(st.just("submit"), st.sampled_from(["a", "b"]), st.booleans()),
    st.tuples(st.just("release"), st.integers(0, 5), st.integers(0, 50)),
    st.tuples(st.just("start"), st.integers(0, 50), st.sampled_from([None, 0.5, 2.0]), st.sampled_from([0, 1, 137])),
    st.tuples(st.just("blacklist"), st.integers(0, 5), st.sampled_from(HOSTS), st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from([0.3, 1.0, 3.0])),
    st.tuples(st.just("node"), st.sampled_from(["lose_node", "mark_unhealthy", "restore_node"]), st.sampled_from(HOSTS)),
    st.tuples(st.just("kill_am"), st.integers(0, 5)),
    st.tuples(st.just("fail"), st.integers(0, 50)),
    st.tuples(st.just("kill_app"), st.integers(0, 5)),
)


def execute(op_list, check=True, after_each=None):
    """Run ``op_list`` on a fresh simulation; ``after_each(sim)`` is called after every operation."""
    sim = Simulation(SPECS, [Queue("a", max_gpus=16, max_mem=200000), Queue("b")])
    events = []
    sim.subscribe(events.append)
    apps: list[str] = []
    for queue, keep in (("a", True), ("b", False)):
        apps.append(sim.client.submit(ApplicationSubmission("p", queue=queue, keep_containers_across_attempts=keep)))
        sim.client.register(apps[-1])
    containers: list[str] = []
    rid = 0
    for op in op_list:
        kind = op[0]
        try:
            if kind == "submit":
                app = sim.client.submit(ApplicationSubmission("p", queue=op[1], keep_containers_across_attempts=op[2]))
                sim.client.register(app)
                apps.append(app)
            elif kind in ("ask", "release", "blacklist") and apps:
                app = apps[op[1] % len(apps)]
                report = sim.client.application_report(app)
                if report.state is AppState.ACCEPTED:
                    sim.client.register(app)
                    report = sim.client.application_report(app)
                if report.state is not AppState.RUNNING:
                    continue
                if kind == "ask":
                    reqs = []
                    for r, host, rack, relax, count in op[2]:
                        rid += 1
                        reqs.append(ResourceRequest(rid, r, count, host, rack, relax))
                    req = AllocateRequest(app, report.attempt, asks=tuple(reqs))
                elif kind == "release":
                    mine = [c for c in containers if c.split("_")[1] == app.split("_")[1]]
                    req = AllocateRequest(app, report.attempt, releases=tuple(mine[op[2] % len(mine):][:1]) if mine else ())
                else:
                    req = AllocateRequest(app, report.attempt, blacklist_additions=(op[2],) if op[3] else (),
                                          blacklist_removals=() if op[3] else (op[2],))
                resp = sim.client.allocate(req)
                containers.extend(c.container_id for c in resp.allocated)
            elif kind == "start" and containers:
                sim.client.start_container(containers[op[1] % len(containers)],
                                           LaunchContext.of(env={} if op[2] is None else raw_task_env(op[2], op[3])))
            elif kind == "advance":
                sim.run_until(sim.now() + op[1])
            elif kind == "node":
                getattr(sim.core, op[1])(op[2])
            elif kind == "kill_am" and apps:
                sim.core.kill_am(apps[op[1] % len(apps)])
            elif kind == "fail" and containers:
                sim.core.fail_container(containers[op[1] % len(containers)], 2)
            elif kind == "kill_app" and apps:
                sim.client.kill(apps[op[1] % len(apps)])
        except InvalidRequest:
            pass   # e.g. a host outside the named rack: refused, nothing changed
        except RMError:
            pass   # e.g. starting a container that was already killed
        if check:
            sim.core.check_invariants()
        if after_each is not None:
            after_each(sim)
    return sim, events


@settings(max_examples=200)
@given(st.lists(ops, min_size=5, max_size=40))
def test_never_double_books(op_list):
    sim, _ = execute(op_list)
    for node in sim.client.cluster_nodes():
        used = sim.core.ledger.used(sim.core.ledger.host_index[node.host])
        assert node.free.add(used).memory_mb == node.capacity.memory_mb
        assert node.free.gpu_mask | used.gpu_mask == node.capacity.gpu_mask
        assert not node.free.gpu_mask & used.gpu_mask
        i = sim.core.ledger.host_index[node.host]
        milli_free = sim.core.ledger.gpu_milli_free_rows([i])[0][:node.capacity.gpus]
        assert (milli_free + sim.core.ledger.used_milli(i)[:node.capacity.gpus] == 1000).all()
        # the report carries the per-GPU milli exactly when some GPU holds a share
        shared = sim.core.ledger.gpus_shared[i] > 0
        assert (node.gpu_milli_free is not None) == shared
        if shared:
            assert list(node.gpu_milli_free) == milli_free.tolist()


@settings(max_examples=100)
@given(st.lists(ops, min_size=5, max_size=40))
def test_a_view_kept_from_the_ledgers_rows_is_the_view_kept_from_node_reports(op_list):
    """A driver's shared view kept from the RM's changed rows and its ledger's columns
    (trace replay: ClusterTracker.take_rows) is, after every operation, the view kept from
    the same nodes' reports (ClusterTracker.apply): the same free resources, shares, ports
    and health, and the same answer to "did some node grow"."""
    trackers = {}

    def sync(sim):
        core = sim.core
        if not trackers:
            trackers["reports"], trackers["rows"] = ClusterTracker(core.cluster_nodes), ClusterTracker(core.cluster_nodes)
            trackers["report_cursor"] = core.changed_nodes(None)[1]
            trackers["changed_rows"] = core.ledger.watch_rows()
        reports, trackers["report_cursor"] = core.changed_nodes(trackers["report_cursor"])
        rows = trackers["changed_rows"]
        # the ledger saw a row change exactly where the RM reports its node changed (a node
        # whose containers changed had its row booked or given back)
        assert sorted(core.ledger.hosts[i] for i in rows) == sorted(r.host for r in reports)
        by_reports, by_rows = trackers["reports"], trackers["rows"]
        assert by_rows.take_rows(core.ledger, rows) == by_reports.apply(reports)
        rows.clear()
        assert by_rows.grown == by_reports.grown
        a, b = by_reports.view, by_rows.view
        for column in ("memory_free", "mvcores_free", "gpu_free_mask", "gpus_free", "healthy", "gpu_share_used",
                       "gpus_shared", "ports_free_count"):
            assert getattr(a, column).tolist() == getattr(b, column).tolist(), column
        assert a.ports_free == b.ports_free
        assert a.is_empty() == b.is_empty()

    execute(op_list, after_each=sync)


@settings(max_examples=40)
@given(st.lists(ops, max_size=30))
def test_same_operations_same_outcome(op_list):
    sim1, ev1 = execute(op_list, check=False)
    sim2, ev2 = execute(op_list, check=False)
    assert ev1 == ev2
    assert snapshot(sim1.core) == snapshot(sim2.core)


def asks_for_something(ask) -> bool:
    """An ask for no memory, vcores, GPUs or share is refused whole (tests/unit/test_rm_limits.py)."""
    r = ask[0]
    return bool(r.memory_mb or r.vcores or r.gpus or r.gpu_milli)


@settings(max_examples=60)
@given(st.lists(asks.filter(asks_for_something), min_size=1, max_size=6))
def test_every_ask_is_granted_pending_or_rejected(ask_list):
    """No ask disappears: each one's containers are allocated, pending, or the ask is rejected."""
    sim = Simulation(SPECS)
    app = sim.client.submit(ApplicationSubmission("p"))
    sim.client.register(app)
    reqs = tuple(ResourceRequest(k, r, count, host, None, relax) for k, (r, host, _, relax, count) in enumerate(ask_list))
    resp = sim.client.allocate(AllocateRequest(app, 1, asks=reqs))
    granted = {}
    for c in resp.allocated:
        granted[c.request_id] = granted.get(c.request_id, 0) + 1
        req = reqs[c.request_id]
        if req.resource.gpu_milli:   # a share: on one GPU, the one named if the ask named one
            assert c.resource.gpu_milli == req.resource.gpu_milli and c.resource.gpus == 0
            assert bin(c.resource.gpu_mask).count("1") == 1 and req.resource.gpu_mask in (0, c.resource.gpu_mask)
        else:
            assert req.resource.fits_in(c.resource) or c.resource.gpu_mask and req.resource.gpus == c.resource.gpus
        if req.host and not req.relax_locality:
            assert c.host == req.host
    pending = {p.request_id: p.remaining for p in resp.pending}
    rejected = {j.request_id for j in resp.rejected}
    for req in reqs:
        if req.request_id in rejected:
            assert req.request_id not in granted and req.request_id not in pending
        else:
            assert granted.get(req.request_id, 0) + pending.get(req.request_id, 0) == req.count


@settings(max_examples=40)
@given(st.lists(ops, min_size=5, max_size=30))
def test_state_file_round_trip(op_list):
    """Whatever happened, saving and restoring gives the same RM (and it re-books cleanly)."""
    from gangmaster.tools.rmsim.clock import VirtualLoop
    from gangmaster.tools.rmsim.nodemanager import SimulatedNodeManager
    from gangmaster.tools.rmsim.state import restore

    sim, _ = execute(op_list, check=False)
    data = snapshot(sim.core)
    loop = VirtualLoop(start=sim.now())
    again = restore(json.loads(json.dumps(data)), loop, SimulatedNodeManager(loop))
    again.check_invariants()
    assert snapshot(again) == data


@settings(max_examples=60)
@given(st.lists(st.integers(1, 24), min_size=2, max_size=4), st.lists(st.integers(0, 3), min_size=1, max_size=8))
def test_fair_between_queues(limits, app_queues):
    """Freed capacity goes to the queue with the lowest share first: after a pass, two
    queues that both still wait (below their limit) differ in share by at most one container."""
    queues = [Queue(f"q{k}", max_gpus=g) for k, g in enumerate(limits)] + [Queue("hog")]
    sim = Simulation(SPECS, queues)
    hog = sim.client.submit(ApplicationSubmission("hog", queue="hog"))
    sim.client.register(hog)
    held = sim.client.allocate(AllocateRequest(hog, 1, asks=(
        ResourceRequest(1, ResourceDescriptor(16, 0.01, 1), count=24),))).allocated
    assert len(held) == 24
    apps = []
    for k, q in enumerate(app_queues):
        app = sim.client.submit(ApplicationSubmission(f"a{k}", queue=f"q{q % len(limits)}"))
        sim.client.register(app)
        sim.client.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, ResourceDescriptor(16, 0.01, 1), count=30),)))
        apps.append(app)
    sim.client.allocate(AllocateRequest(hog, 1, releases=tuple(c.container_id for c in held)))
    sim.core.check_invariants()
    waiting = [q for q in queues[:-1] if q.apps and q.used_gpus < q.max_gpus]
    for a in waiting:
        for b in waiting:
            assert a.used_gpus / a.max_gpus - b.used_gpus / b.max_gpus <= 1 / a.max_gpus + 1e-9
    assert sum(q.used_gpus for q in queues) == 24 or not waiting
