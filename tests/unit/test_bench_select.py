"""``gangmaster bench select`` measures one strategy at a time and lets go of its indexes.

At 1,000,000 nodes every strategy's key columns and node indexes alive at once took
23 GB (~16.6 KB per node); one at a time, the peak is the largest one."""
from __future__ import annotations

import argparse
import weakref

from gangmaster.selectors.cluster import ClusterView
from gangmaster.tools.bench import select


def test_each_strategy_indexes_are_gone_before_the_next_strategy_starts(monkeypatch, capsys):
    built = []      # (strategy number, weakref to a key column or node index it built)
    alive_at_start = []
    strategy = [0]
    derived = ClusterView.derived

    def recording_derived(view, name, build):
        state = derived(view, name, build)
        built.append((strategy[0], weakref.ref(state)))
        return state

    real_strategy_view = select.strategy_view

    def watched_strategy_view(view):
        alive_at_start.append([n for n, ref in built if ref() is not None])
        strategy[0] += 1
        return real_strategy_view(view)

    monkeypatch.setattr(ClusterView, "derived", recording_derived)
    monkeypatch.setattr(select, "strategy_view", watched_strategy_view)
    args = argparse.Namespace(nodes=[300], requests=60, seed=0, selector=["job-packing", "fgd", "dot-product"],
                              rounds=2)
    assert select.run(args) == 0
    assert len({n for n, _ in built}) >= 3, "the strategies built no indexes: nothing was checked"
    assert alive_at_start == [[]] * len(alive_at_start)
    out = capsys.readouterr().out
    assert "peak RSS:" in out
    # job-packing and the same-pick floor, timed in turn (the other strategies are not)
    assert [line.split(",")[0] for line in out.splitlines() if "in turn" in line] == [
        "     300 job-packing and floor (same) in turn"]


def test_a_strategy_too_slow_at_a_size_is_skipped_with_its_reason(monkeypatch, capsys):
    monkeypatch.setitem(select.LARGEST_CLUSTER, "best-fit", (200, "a reason"))
    args = argparse.Namespace(nodes=[300], requests=60, seed=0, selector=["best-fit"], rounds=2)
    assert select.run(args) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if "best-fit" in line] == [
        "     300 best-fit        skipped: measured up to 200 nodes; a reason"]
