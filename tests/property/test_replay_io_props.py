"""Invariants of the replay's readers and metrics, over generated inputs."""
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.conf.fields import ConfigError
from gangmaster.tools.replay.clusters import from_tiresias_spec
from gangmaster.tools.replay.metrics import Window, measurement_window, time_average
from gangmaster.tools.replay.readers import read_trace
from gangmaster.tools.replay.trace import NodeShape
from gangmaster.tools.replay.trace_csv import BadRows


@settings(max_examples=60)
@given(gpus=st.integers(1, 4096), node_gpus=st.sampled_from([1, 2, 4, 8, 16]))
def test_a_gang_is_split_into_whole_nodes_and_one_remainder(gpus, node_gpus):
    roles = NodeShape(node_gpus, 10.0 * node_gpus, 65536 * node_gpus).gang_roles(gpus)
    assert sum(r.instances * r.gpus for r in roles) == gpus
    assert all(r.gpus <= node_gpus for r in roles)
    assert sum(r.instances for r in roles) == -(-gpus // node_gpus)       # the fewest nodes possible
    assert sum(r.instances for r in roles if r.gpus < node_gpus) <= 1
    for r in roles:   # an instance's share of the node never exceeds the node
        assert r.vcores * (node_gpus // r.gpus) <= 10.0 * node_gpus and r.memory_mb <= 65536 * node_gpus


steps = st.lists(st.tuples(st.floats(0, 1000, allow_nan=False), st.integers(0, 64)), min_size=1, max_size=30)


@settings(max_examples=60)
@given(steps=steps, a=st.floats(0, 1200), b=st.floats(0, 1200))
def test_time_average_equals_a_fine_riemann_sum(steps, a, b):
    t0, t1 = min(a, b), max(a, b)
    steps = sorted(dict(steps).items())
    t = np.array([s[0] for s in steps])
    v = np.array([s[1] for s in steps])
    window = Window(0, 1, 1, t0, t1, 0.0)
    got = time_average(t, v, window)
    assert 0 <= got <= max(v) + 1e-9
    if t1 - t0 > 1.0:
        grid = np.linspace(t0, t1, 20001)[:-1] + (t1 - t0) / 40000
        index = np.searchsorted(t, grid, side="right") - 1
        expected = np.where(index >= 0, v[np.clip(index, 0, None)], 0).mean()
        assert abs(got - expected) <= max(v) * (len(t) + 1) * 2 / 20000 + 1e-9


@settings(max_examples=60)
@given(n=st.integers(0, 500), trim=st.floats(0, 0.49))
def test_the_window_drops_the_same_number_of_jobs_at_each_end(n, trim):
    window = measurement_window([float(k) for k in range(n)], trim)
    if window.jobs:
        assert window.first == n - window.last == int(n * trim)
        assert (window.start_s, window.end_s) == (float(window.first), float(window.last - 1))


# ------------------------------------------------------------------ fuzzing the trace readers
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
EIGHT = NodeShape(8, 80.0, 524288)
READS = [("philly_small.csv", lambda p, bad: read_trace(p, "philly", EIGHT, bad)),
         ("tiresias_small.csv", lambda p, bad: read_trace(p, "tiresias", EIGHT, bad)),
         ("native_small.csv", lambda p, bad: read_trace(p, "native", EIGHT, bad)),
         ("native_small.yaml", lambda p, bad: read_trace(p, "native", EIGHT, bad)),
         ("tiresias_n4g4.csv", lambda p, bad: from_tiresias_spec(p))]


@pytest.mark.parametrize("name, read", READS, ids=[name for name, _ in READS])
@settings(max_examples=40)
@given(data=st.data())
def test_a_damaged_trace_is_read_or_refused_with_a_config_error(name, read, data):
    """Whatever is spliced into a shipped trace, the reader returns a table or raises a
    ConfigError naming the file: never another exception."""
    text = (FIXTURES / name).read_bytes()
    at = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 20))
    spliced = data.draw(st.one_of(st.binary(max_size=20), st.text(max_size=20).map(str.encode),
                                  st.sampled_from([b",", b"\n", b"nan", b"inf", b"-1", b"1e400", b'"', b"\x00"])))
    damaged = text[:at] + spliced + text[at + cut:]
    skip = data.draw(st.booleans())
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(damaged)
        try:
            read(path, BadRows("skip" if skip else "stop"))
        except ConfigError as error:
            assert str(error).startswith(str(path)) or str(error).startswith("--"), str(error)
