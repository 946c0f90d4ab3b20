"""``gangmaster bench gang``'s floor answers what the decision answers: every instance of
every role counted on a copy of the free columns, as much taken from them as the gang
asks, and the bench refuses to print a ratio against a floor that did not."""
from __future__ import annotations

import argparse

from gangmaster.conf import conf_path
from gangmaster.tools.bench import gang

STORY3 = str(conf_path("clusters/story3.yaml"))


def test_the_floor_places_every_instance_and_takes_what_the_gang_asks():
    view = gang.scaled_cluster(STORY3, 1)
    roles = gang.story3_roles(300, 500)
    filled = gang.numpy_floor(view, roles, 10000)
    assert [int(filled.instances_of(r.name).sum()) for r in roles] == [1, 300, 500]
    assert int((view.memory_free - filled.memory_free).sum()) == sum(r.instances * r.memory_mb for r in roles)
    assert int((view.gpus_free - filled.gpus_free).sum()) == 500
    assert int(filled.instances_of("server").max()) == 1 and view.memory_free.tolist() == \
        gang.scaled_cluster(STORY3, 1).memory_free.tolist()   # (the view itself untouched)


def test_the_bench_refuses_a_floor_that_placed_less(monkeypatch, capsys):
    args = argparse.Namespace(cluster=STORY3, selector="job-packing", scale=1, servers=20, workers=20, repeat=1)
    assert gang.run(args) == 0 and "ratio to the floor" in capsys.readouterr().out
    real = gang.numpy_floor
    monkeypatch.setattr(gang, "numpy_floor", lambda view, roles, port_min: real(view, roles[:2], port_min))
    assert gang.run(args) == 1
    assert "the floor did not place every instance of worker" in capsys.readouterr().out
