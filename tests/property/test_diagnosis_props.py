"""Properties of the diagnosis (am/ops/diagnosis.py) on small random clusters: random
machine kinds, unhealthy machines and another job's allocations, a random gang.

* ``placeable`` per role never exceeds ``needed``; the gang can start exactly when
  place_gang places it; a role that falls short is explained node by node (its reason
  counts add up to the machines of the cluster);
* waiting helps only where another job holds something (no other job: no reason
  says waiting helps, and no job is named); the gang's own instances are not blamed
  where none of them is placed yet;
* every hint is checked: "N more machines like HOST" lets the gang start, N - 1 do
  not; "when job X ends" lets it start once X's allocations are gone.

Roles may ask a share of one GPU, and the other job may hold shares as well as whole GPUs;
the view is the one bookings leave, or the one read from node reports (where a GPU full of
shares reads as taken, as the AM's view has it)."""
from __future__ import annotations

import re

from hypothesis import given, note, settings, strategies as st

from gangmaster.am.ops.diagnosis import Occupant, with_more_machines, diagnose
from gangmaster.am.core.gang_placement import GangDoesNotFit, place_gang
from gangmaster.am.spec.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor
from share_roles import ShareRole

PORTS = PortRanges.parse("20000-20019")
KINDS = [(16, 65536, 4), (32, 131072, 8), (8, 32768, 0)]   # vcores, memory, GPUs


@st.composite
def cases(draw):
    kinds = draw(st.lists(st.sampled_from(range(len(KINDS))), min_size=1, max_size=6))
    specs = [NodeSpec(f"n{i}", f"r{i % 2}", frozenset(), "V100" if KINDS[k][2] else None, None, KINDS[k][1],
                      KINDS[k][0], KINDS[k][2], PORTS) for i, k in enumerate(kinds)]
    view = ClusterView(specs)
    occupants = []
    for i, spec in enumerate(specs):
        state = draw(st.sampled_from(["free", "free", "down", "busy"]))
        if state == "down":
            view.set_health(spec.host, False)
        elif state == "busy":
            vcores = draw(st.integers(1, int(spec.vcores)))
            gpus = draw(st.integers(0, spec.gpus))
            view.allocate(spec.host, ResourceDescriptor(vcores=vcores, memory_mb=1024, gpu_mask=(1 << gpus) - 1))
            shares = []
            if gpus < spec.gpus:   # shares on the GPUs above the whole ones
                for milli in draw(st.lists(st.sampled_from([300, 500, 700]), max_size=3)):
                    gpu = draw(st.integers(gpus, spec.gpus - 1))
                    if view.gpu_milli_free[i, gpu] >= milli:
                        view.allocate(spec.host, ResourceDescriptor(gpu_milli=milli, gpu_mask=1 << gpu))
                        shares.append((gpu, milli))
            occupants.append(Occupant("other", spec.host, float(vcores), 1024, gpus, 100.0, tuple(shares)))
    roles = []
    for k in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([0, 1, 2, "share"]))
        roles.append(ShareRole(name=f"r{k}", instances=draw(st.integers(1, 6)), cpu=draw(st.sampled_from([1, 4, 10])),
                               memory_mb=1024, gpus=0 if gpus == "share" else gpus, ports={}, commands=("true",),
                               completion=Completion(), task_retry_count=0, retry=RetryPolicy(),
                               max_instances_per_node=draw(st.sampled_from([None, 1, 2])),
                               gpu_milli=draw(st.sampled_from([250, 500, 800])) if gpus == "share" else 0))
    if draw(st.booleans()):
        view = as_reported(view)
    return view, occupants, tuple(roles)


def as_reported(booked: ClusterView) -> ClusterView:
    """The view an AM reads from the RM's node reports of ``booked``: free resources and
    milli-GPU free per GPU (a GPU full of shares reads as taken), and health."""
    view = ClusterView(booked.specs)
    for i, spec in enumerate(booked.specs):
        view.set_free(spec.host, booked.free(i), tuple(booked.gpu_milli_free[i, :spec.gpus].tolist()))
        view.set_health(spec.host, bool(booked.healthy[i]))
    return view


def starts(view, roles) -> bool:
    try:
        place_gang(view, roles, SelectionPipeline())
    except GangDoesNotFit:
        return False
    return True


@settings(max_examples=60)
@given(cases(), st.booleans())
def test_a_diagnosis_agrees_with_the_placement_kernel(case, named):
    view, occupants, roles = case
    d = diagnose(view, roles, SelectionPipeline(), job="j", occupants=occupants if named else ())
    note(d.text())
    assert d.gang_can_start == starts(view, roles)
    for role in roles:
        r = d.roles[role.name]
        assert r.needed == role.instances and 0 <= r.placeable <= r.needed
        if r.shortfall:
            assert sum(x.count for x in r.reasons) == len(view)
        else:
            assert r.reasons == []
    if not occupants:
        assert not any(x.waiting_helps for r in d.roles.values() for x in r.reasons)
    first = d.roles[roles[0].name]   # placed first: when none of it fits, nothing of the gang holds anything
    if first.placeable == 0:
        assert not any(x.code.endswith("-held-by-gang") for x in first.reasons), first.reasons
    if not named:
        assert d.blocking_jobs == []
    more = re.search(r"(\d+) more machine\(s\) like (\S+?)(,|$)", d.hint)
    if more:
        n, spec = int(more.group(1)), view.specs[view.index(more.group(2))]
        assert starts(with_more_machines(view, spec, n), roles)
        assert n == 1 or not starts(with_more_machines(view, spec, n - 1), roles)
    if "when job other ends" in d.hint:   # the only other job: once it ends, only health is left
        freed = ClusterView(view.specs)
        for i, spec in enumerate(view.specs):
            freed.set_health(spec.host, bool(view.healthy[i]))
        assert starts(freed, roles)
