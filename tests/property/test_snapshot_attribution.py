"""Invariants of attributing a node listing's usage to a job listing's allocations
(tools/snapshots/attribution.py), whatever the two files say."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.fit import milli
from gangmaster.tools.snapshots import UNATTRIBUTED, RunningAllocation
from gangmaster.tools.snapshots.attribution import reconcile
from gangmaster.tools.snapshots.model import Usage

HOSTS = ["a", "b", "c"]
amounts = st.tuples(st.integers(0, 64_000).map(lambda m: m / 1000), st.integers(0, 4096), st.integers(0, 8))


@settings(max_examples=150)
@given(capacity=st.lists(amounts, min_size=3, max_size=3),
       used=st.one_of(st.none(), st.lists(amounts, min_size=3, max_size=3)),
       named=st.lists(st.tuples(st.sampled_from(["j1", "j2", "j3"]), st.sampled_from(HOSTS + ["ghost"]), amounts,
                                st.one_of(st.none(), st.floats(0, 1e6))), max_size=12))
def test_what_runs_on_a_node_is_what_it_reports_in_use_and_never_more_than_it_has(capacity, used, named):
    specs = [NodeSpec(h, vcores=c[0], memory_mb=c[1], gpus=c[2]) for h, c in zip(HOSTS, capacity)]
    reported = None if used is None else {h: Usage(*u) for h, u in zip(HOSTS, used)}
    allocations = [RunningAllocation(job, host, *amount, ends) for job, host, amount, ends in named]
    running, notes = reconcile(specs, allocations, reported)
    assert len({(a.job, a.host) for a in running}) == len(running)          # one per job and host
    for spec in specs:
        here = [a for a in running if a.host == spec.host]
        total = [sum(milli(a.vcores) for a in here), sum(a.memory_mb for a in here), sum(a.gpus for a in here)]
        bound = [milli(spec.vcores), spec.memory_mb, spec.gpus]
        if reported is not None:       # the node listing is the truth: exactly its usage, within capacity
            u = reported[spec.host]
            assert total == [min(b, x) for b, x in zip(bound, (milli(u.vcores), u.memory_mb, u.gpus))]
        else:
            assert all(t <= b for t, b in zip(total, bound))
            assert not any(a.job == UNATTRIBUTED for a in here)
        for a in here:
            assert any((a.vcores, a.memory_mb, a.gpus)) and a.vcores >= 0
    assert all(a.host in HOSTS for a in running)
    if any(host == "ghost" for _, host, _, _ in named):
        assert any("ghost" in note for note in notes)
