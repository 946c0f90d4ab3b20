"""The diagnosis as data (am/ops/diagnosis.py) on small clusters: every role evaluated with
the others placed, waiting that helps told from waiting that does not, the jobs holding
the capacity, and hints that are the smallest change that lets the gang start."""
from __future__ import annotations

import pytest

from gangmaster.am.ops.diagnosis import Occupant, diagnose
from gangmaster.am.core.gang_placement import GangDoesNotFit, place_gang
from gangmaster.am.core.victims import Outlook, Priority, RunningGang, candidates
from gangmaster.am.spec.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.explanation import Rejection
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor as R

PORTS = PortRanges.parse("20000-20099")


def role(name, instances, cpu=2, memory=1024, gpus=0, cap=None, ratio=1.0, label=None):
    return RoleSpec(name=name, instances=instances, cpu=cpu, memory_mb=memory, gpus=gpus, ports={"p": 1},
                    commands=("true",), completion=Completion(), task_retry_count=0, retry=RetryPolicy(),
                    request_ratio=ratio, max_instances_per_node=cap, node_label=label)


def cluster(n: int, vcores: int = 16) -> ClusterView:
    return ClusterView([NodeSpec(f"n{i}", f"rack-{i % 2}", frozenset(), "V100", None, 65536, vcores, 4, PORTS)
                        for i in range(n)])


def reasons(diagnosis, name):
    return {(r.code, r.count, r.waiting_helps) for r in diagnosis.roles[name].reasons}


def starts(view, roles) -> bool:
    try:
        place_gang(view, roles, SelectionPipeline())
    except GangDoesNotFit:
        return False
    return True


def test_every_role_is_evaluated_with_the_others_placed_as_the_gang_would():
    view = cluster(4)
    view.set_health("n3", False)
    roles = (role("a", 2, cpu=8, cap=1), role("b", 2, cpu=10, cap=1), role("c", 4, cap=1))
    d = diagnose(view, roles, SelectionPipeline(), job="j")
    assert (d.roles["a"].needed, d.roles["a"].placeable, d.roles["a"].shortfall) == (2, 2, 0)
    # b alone would fit 3 machines; with a's instances placed first, one is left: the rest is the gang's own
    assert (d.roles["b"].placeable, d.roles["b"].shortfall) == (1, 1)
    assert reasons(d, "b") == {("unhealthy", 1, False), ("role-cap-reached", 1, False),
                               ("vcores-held-by-gang", 2, False)}
    assert d.roles["b"].asked == {"vcores": 10.0, "memoryMB": 1024, "gpus": 0}
    # c, after a role that fell short, is still evaluated (placement stops at the first failing role)
    assert (d.roles["c"].placeable, d.roles["c"].shortfall) == (3, 1)
    assert reasons(d, "c") == {("unhealthy", 1, False), ("role-cap-reached", 3, False)}
    assert not d.gang_can_start and d.fits_empty_cluster and d.healthy_machines == 3
    assert d.hint == "1 more machine(s) like n0, or restore 1 of the 1 unhealthy/blacklisted machines (n3)"
    assert view.mvcores_free.sum() == view.mvcores_capacity.sum()   # the view is not changed


def test_capacity_held_by_another_job_is_worth_waiting_for_and_names_the_job():
    view = cluster(4)
    for host in ("n0", "n1"):
        view.allocate(host, R(vcores=12, memory_mb=4096))
    running = [Occupant("etl", h, 12.0, 4096, 0, 300.0) for h in ("n0", "n1")]
    roles = (role("server", 4, cpu=16, cap=1, ratio=0.5),)      # asks 8 vcores; 4 are free on n0, n1
    d = diagnose(view, roles, SelectionPipeline(), job="j", occupants=running)
    server = d.roles["server"]
    assert (server.placeable, server.shortfall) == (2, 2)
    assert reasons(d, "server") == {("role-cap-reached", 2, False), ("vcores-exhausted", 2, True)}
    assert server.asked == {"vcores": 8.0, "memoryMB": 1024, "gpus": 0}
    assert "each asks vcores=8 (cpu 16 x requestRatio 0.5), memoryMB=1024, gpus=0" in d.text()
    assert [b.to_dict() for b in d.blocking_jobs] == [
        {"job": "etl", "machines": 2, "holds": {"vcores": 24}, "expected_end_s": 300.0}]
    assert d.hint == ("2 more machine(s) like n0, or when job etl ends (expected to end in 5m 00s), "
                      "2 machine(s) get 4.0 → 16.0 free vcores")


BEHIND = [
    # (the blocking job's priority, the gang's own, the summary's note or None)
    (5, 0, "waits behind higher-priority work: etl"),
    (5, 5, None),
    (0, 3, None),            # it outranks etl: not behind it (a preemption could take etl)
]


def test_a_gang_that_waits_behind_higher_priority_work_says_so():
    for theirs, mine, note in BEHIND:
        view = cluster(4)
        for host in ("n0", "n1"):
            view.allocate(host, R(vcores=12, memory_mb=4096))
        running = [Occupant("etl", h, 12.0, 4096, 0, 300.0, priority=theirs) for h in ("n0", "n1")]
        d = diagnose(view, (role("server", 4, cpu=16, cap=1, ratio=0.5),), SelectionPipeline(), job="j",
                     occupants=running, priority=mine)
        assert (note in d.summary() if note else "higher-priority" not in d.summary()), (theirs, mine)
        assert ("cannot preempt them" in d.text()) is bool(note)
        assert d.blocking_jobs[0].to_dict().get("priority", 0) == theirs
        assert ("etl (priority 5) holds" in d.text()) is (theirs == 5)


def test_hints_are_the_smallest_change_that_lets_the_gang_start():
    view = cluster(7)
    for host in ("n1", "n3", "n5"):
        view.set_health(host, False)
    roles = (role("server", 6, cap=1),)
    d = diagnose(view, roles, SelectionPipeline(), job="j")
    assert d.roles["server"].shortfall == 2
    assert d.hint == "2 more machine(s) like n0, or restore 2 of the 3 unhealthy/blacklisted machines (n1, n3)"
    one_back = view.copy()
    one_back.set_health("n1", True)
    assert not starts(one_back, roles)           # one restored is not enough ...
    one_back.set_health("n3", True)
    assert starts(one_back, roles)               # ... two are


def test_a_gang_too_big_for_any_machine_can_never_start():
    d = diagnose(cluster(3), (role("big", 1, cpu=32),), SelectionPipeline(), job="j")
    assert not d.fits_empty_cluster and not d.gang_can_start
    assert reasons(d, "big") == {("vcores-too-small", 3, False)}
    assert d.hint == ("none: the gang can never start on this cluster, even empty it holds 0/1 instances; big[0] "
                      "found no node: 0/3 nodes fit role big: 3 vcores too small (need 32, capacity at most 16)")


def test_labels_are_a_reason_waiting_does_not_remove():
    d = diagnose(cluster(2), (role("w", 1, label="infiniband"),), SelectionPipeline(), job="j")
    assert reasons(d, "w") == {("label-mismatch", 2, False)}
    assert "without label infiniband" in d.roles["w"].reasons[0].detail


def test_a_gang_that_fits_has_no_reasons_and_no_hint():
    d = diagnose(cluster(4), (role("w", 4, cap=1),), SelectionPipeline(), job="j")
    assert d.gang_can_start and d.hint == "" and d.roles["w"].reasons == []
    assert d.summary() == "the gang can start now"


def test_the_json_has_the_issues_shape():
    d = diagnose(cluster(1), (role("w", 2, cap=1),), SelectionPipeline(), job="j", gang="w")
    data = d.to_dict()
    assert {"job", "gang_can_start", "fits_empty_cluster", "healthy_machines", "roles", "blocking_jobs",
            "hint"} <= set(data)
    assert set(data["roles"]["w"]) == {"needed", "placeable", "shortfall", "asked", "reasons"}
    assert set(data["roles"]["w"]["reasons"][0]) == {"code", "count", "waiting_helps", "detail"}


def test_a_rejection_keeps_its_nodes_out_of_its_dict_and_comparisons():
    import numpy as np
    a = Rejection("health", "unhealthy", "exhausted", 1, nodes=np.array([True, False]))
    b = Rejection("health", "unhealthy", "exhausted", 1)
    assert a == b and "nodes" not in a.to_dict()


def test_a_share_role_is_diagnosed_in_milli_of_one_gpu():
    """Two one-GPU machines each hold another job's 600-milli share; a third is the
    gang's; a CPU machine has no GPU to share. Only the other job's shares going lets
    the gang start."""
    from share_roles import ShareRole

    view = ClusterView([NodeSpec(f"n{i}", "r", frozenset(), "V100" if i < 3 else None, None, 65536, 16,
                                 1 if i < 3 else 0, PORTS) for i in range(4)])
    for host in ("n0", "n1"):
        view.allocate(host, R(gpu_milli=600, gpu_mask=0b1))
    running = [Occupant("etl", h, 0.0, 0, 0, 120.0, gpu_shares=((0, 600),)) for h in ("n0", "n1")]
    infer = ShareRole(name="infer", instances=4, cpu=1, memory_mb=1024, gpus=0, ports={}, commands=("true",),
                      completion=Completion(), task_retry_count=0, retry=RetryPolicy(), gpu_milli=500)
    d = diagnose(view, (infer,), SelectionPipeline(), job="j", occupants=running)
    r = d.roles["infer"]
    assert (r.placeable, r.shortfall) == (2, 2) and r.asked["gpuMilli"] == 500
    assert reasons(d, "infer") == {("gpu-share-too-small", 1, False), ("gpu-share-exhausted", 2, True),
                                   ("gpu-share-held-by-gang", 1, False)}
    assert "each asks vcores=1, memoryMB=1024, gpuMilli=500" in d.text()
    assert "2 machine(s) with milli of one GPU exhausted by other jobs (need 500, most free 400)" in d.text()
    assert [b.to_dict() for b in d.blocking_jobs] == [
        {"job": "etl", "machines": 2, "holds": {"gpuMilli": 1200}, "expected_end_s": 120.0}]
    assert d.hint == ("1 more machine(s) like n0, or when job etl ends (expected to end in 2m 00s), "
                      "2 machine(s) get 400.0 → 1000.0 free milli of one GPU")
    freed = view.copy()                       # the hint holds: with etl's shares gone, the gang starts
    for host in ("n0", "n1"):
        freed.release(host, R(gpu_milli=600, gpu_mask=0b1))
    assert starts(freed, (infer,)) and not starts(view, (infer,))


def test_a_share_waits_for_gpus_another_job_holds_in_a_view_read_from_node_reports():
    """The AM's view is read from the RM's node reports: a GPU full of another job's
    shares reads as taken (0 milli free), like a GPU taken whole; either way waiting helps."""
    from share_roles import ShareRole

    view = ClusterView([NodeSpec(f"n{i}", "r", frozenset(), "V100", None, 65536, 16, 2, PORTS) for i in range(2)])
    for host in view.hosts:
        view.set_free(host, view.free(view.index(host)).with_(gpus=0, gpu_mask=0), (0, 0))
    running = [Occupant("etl", h, 0.0, 0, 1, 60.0, gpu_shares=((0, 500), (0, 500))) for h in view.hosts]
    infer = ShareRole(name="infer", instances=2, cpu=1, memory_mb=1024, gpus=0, ports={}, commands=("true",),
                      completion=Completion(), task_retry_count=0, retry=RetryPolicy(), gpu_milli=250)
    train = ShareRole(name="train", instances=1, cpu=1, memory_mb=1024, gpus=2, ports={}, commands=("true",),
                      completion=Completion(), task_retry_count=0, retry=RetryPolicy())
    d = diagnose(view, (infer, train), SelectionPipeline(), job="j", occupants=running)
    assert reasons(d, "infer") == {("gpu-share-exhausted", 2, True)}
    assert [b.to_dict() for b in d.blocking_jobs] == [
        {"job": "etl", "machines": 2, "holds": {"gpuMilli": 4000, "gpus": 2}, "expected_end_s": 60.0}]
    # etl's end frees both GPUs of a node: the one its shares fill and the one it holds whole
    assert "when job etl ends (expected to end in 1m 00s)" in d.hint


def _held(view, occupants):
    for o in occupants:
        view.allocate(o.host, R(gpus=o.gpus, gpu_mask=(1 << o.gpus) - 1, memory_mb=o.memory_mb, vcores=o.vcores))
    return occupants


@pytest.mark.parametrize("ends, line", [
    # (seconds until each holder ends, on n0..n2; None: unknown) -> the diagnosis's line
    ((7140.0, 7140.0, 60.0), "expected to start in ~1h 59m on 3 machines when xlibmpi ends (from declared durations)"),
    ((60.0, 60.0, 60.0), "expected to start in ~1m on 3 machines when xlibmpi ends (from declared durations)"),
    ((None, 60.0, 60.0), "expected start: unknown (no expected end is known for the work holding the room it "
                         "needs, or it needs more than the cluster)"),
])
def test_a_waiting_gang_is_told_when_it_is_expected_to_start(ends, line):
    """Issue 30: a 3 x 4-GPU gang on 3 busy 4-GPU machines starts when the last of the jobs
    holding them ends, as their expected ends say (Slurm backfill's start time)."""
    view = cluster(3)
    running = _held(view, [Occupant("xlibmpi", f"n{i}", 1.0, 1024, 4, end) for i, end in enumerate(ends)])
    d = diagnose(view, (role("w", 3, gpus=4),), SelectionPipeline(), job="j", occupants=running)
    assert not d.gang_can_start
    assert d.text().splitlines()[-1] == f"  {line}"
    assert (d.to_dict()["expected_start"] or {}).get("line", line) == line


def _gangs(view, held, now=3600.0):
    """The running gangs as the RM would hand them to a diagnosis (Outlook's candidates):
    ``held``: (job, its priority, hosts, seconds it has run), each host's 12 vcores and 4 GiB."""
    return tuple(RunningGang(job, "default", Priority(0, prio), 0.0 if not gpus else float(gpus * len(hosts)),
                             now - ran, tuple((view.index(h), R(vcores=12, memory_mb=4096, gpu_mask=(1 << gpus) - 1)) for h in hosts),
                             job)
                 for job, prio, hosts, ran, gpus in held)


def _preempting(view, held, mine, grace_s=30.0, **rules):
    """What the RM would hand the diagnosis of a gang of priority ``mine``: the gangs of
    ``held`` it may preempt (the RM's rule: a lower priority)."""
    running = _gangs(view, held)
    return Outlook(tuple(candidates(running, Priority(0, mine), "default", 0.0, {})), 3600.0, grace_s, **rules)


PREEMPTS = [
    # (etl's priority, the gang's own, the RM's grace (None: it does not preempt), the line or None)
    (0, 3, 30.0, "will preempt job etl (priority 0, 0 GPUs, 0 GPU-h of work) in ~30 s grace"),
    (0, 3, None, None),      # the RM does not preempt: no promise
    (5, 0, 30.0, "waits behind higher-priority work: etl"),
    (3, 3, 30.0, None),      # equal priorities: nothing to preempt, nothing above
]


@pytest.mark.parametrize("theirs, mine, grace_s, line", PREEMPTS)
def test_a_gang_says_whom_it_will_preempt_or_whom_it_waits_behind(theirs, mine, grace_s, line):
    view = cluster(4)
    for host in ("n0", "n1"):
        view.allocate(host, R(vcores=12, memory_mb=4096))
    running = [Occupant("etl", h, 12.0, 4096, 0, 300.0, priority=theirs) for h in ("n0", "n1")]
    outlook = _preempting(view, [("etl", theirs, ("n0", "n1"), 0.0, 0)], mine, grace_s) if grace_s else None
    d = diagnose(view, (role("server", 4, cpu=16, cap=1, ratio=0.5),), SelectionPipeline(), job="j",
                 occupants=running, priority=mine, preemption=outlook)
    assert (line in d.text() and line in d.summary()) if line else "will preempt" not in d.text()
    assert ("preempts" in d.to_dict()) is (line is not None and line.startswith("will"))


#: (job, priority, hosts, seconds run, GPUs a host): etl on two machines has run longest
HELD = [("etl", 0, ("n0", "n1"), 3000.0, 1), ("batch", 0, ("n2",), 600.0, 1), ("prod", 9, ("n3",), 60.0, 1)]


@pytest.mark.parametrize("servers, victims", [
    # one server: a machine of batch's (the least work lost) is enough, though etl blocks on more machines
    (1, ["batch"]),
    # two: batch's machine and one more: etl's two machines are needed, batch's then not
    (3, ["batch", "etl"]),
    # four: every machine, prod's too: it cannot be preempted, so nothing will be
    (4, []),
])
def test_a_gang_names_the_victims_the_rm_picks_the_fewest_gpu_hours_lost_first(servers, victims):
    view = cluster(4)
    for job, _prio, hosts, _ran, gpus in HELD:
        for host in hosts:
            view.allocate(host, R(vcores=12, memory_mb=4096, gpu_mask=(1 << gpus) - 1))
    running = [Occupant(job, h, 12.0, 4096, gpus, 300.0, priority=prio) for job, prio, hosts, _ran, gpus in HELD
               for h in hosts]
    d = diagnose(view, (role("server", servers, cpu=16, cap=1, ratio=0.5),), SelectionPipeline(), job="j",
                 occupants=running, priority=3, preemption=_preempting(view, HELD, 3, 10.0))
    assert [v.name for v in d.preempts] == victims
    assert [b.job for b in d.blocking_jobs][0] == "etl"   # the blocking order is not the RM's
    if victims == ["batch"]:
        assert "will preempt job batch (priority 0, 1 GPUs, 0.167 GPU-h of work) in ~10 s grace" in d.text()
        assert d.to_dict()["preempts"] == [{"job": "batch", "priority": 0, "gpus": 1, "lost_gpu_h": 0.167}]
    if not victims:
        assert "will preempt" not in d.text() and "preempts" not in d.to_dict()


ENGINE_LINES = [
    # (the engine's preemption, why, the line)
    ("on", "", "Kubernetes would preempt job etl (priority 0, 0 GPUs, 0 GPU-h of work) in ~30 s grace"),
    ("off", "preemptionDisabled on queue root.default",
     "YARN preempts nothing here: its preemption is off (preemptionDisabled on queue root.default); were it on, "
     "it would preempt job etl (priority 0, 0 GPUs, 0 GPU-h of work)"),
    ("unknown", "PreemptType is not in the snapshot",
     "Slurm's preemption is unknown (PreemptType is not in the snapshot): if it is on, it would preempt "
     "job etl (priority 0, 0 GPUs, 0 GPU-h of work)"),
]


@pytest.mark.parametrize("state, why, line", ENGINE_LINES)
def test_on_a_snapshot_the_engine_says_whom_it_would_preempt_and_whether_its_preemption_is_on(state, why, line):
    view = cluster(4)
    for host in ("n0", "n1"):
        view.allocate(host, R(vcores=12, memory_mb=4096))
    engine = line.split(" ")[0].split("'")[0]
    outlook = _preempting(view, [("etl", 0, ("n0", "n1"), 0.0, 0)], 3, 30.0 if state == "on" else None,
                          engine=engine, state=state, why=why)
    d = diagnose(view, (role("server", 4, cpu=16, cap=1, ratio=0.5),), SelectionPipeline(), job="j",
                 occupants=[], priority=3, preemption=outlook)
    assert f"  {line}" in d.text().splitlines() and line in d.summary()
    assert d.to_dict()["preemption"] == {"engine": engine, "state": state, "why": why}


def test_a_victim_the_view_has_not_heard_of_is_free_there_already_and_its_work_lost_is_no_change():
    view = cluster(4)
    for host in ("n0", "n1"):
        view.allocate(host, R(vcores=12, memory_mb=4096, gpu_mask=1))
    # etl as the RM knows it: n0, n1, and n2, which the AM's view (from node reports) does not show in use yet
    held = [("etl", 0, ("n0", "n1", "n2"), 600.0, 1)]
    d = diagnose(view, (role("server", 4, cpu=16, cap=1, ratio=0.5),), SelectionPipeline(), job="j",
                 occupants=[], priority=3, preemption=_preempting(view, held, 3))
    assert [v.name for v in d.preempts] == ["etl"]
    later = Outlook(d.preemption.candidates, d.preemption.now + 600.0, 30.0)   # the same, ten minutes on
    again = diagnose(view, (role("server", 4, cpu=16, cap=1, ratio=0.5),), SelectionPipeline(), job="j",
                     occupants=[], priority=3, preemption=later)
    assert again.to_dict()["preempts"] != d.to_dict()["preempts"] and again.signature() == d.signature()
