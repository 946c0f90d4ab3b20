"""Fuzzing the cluster snapshot readers (tools/snapshots/): whatever the files hold, only a
SnapshotError naming the file comes out, and what does load keeps the snapshot's invariants.

Each example snapshot (conf/snapshots/, tests/fixtures/snapshots/) is loaded with one of
its files changed: one value anywhere in the JSON replaced by another (null, a wrong type,
a negative, huge or fractional number, a Slurm-wrapped number, a string with spaces,
an empty list or object), a key removed, a key given twice, the text cut short, or random
bytes. Invariants
of a snapshot that loads: at least one node, every host once; every unavailable or running host is a node;
per node, what runs adds up to no more than its capacity; amounts finite and >= 0.

60 examples per test; fuzz deeper with ``FUZZ_EXAMPLES=2000``.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangmaster.selectors.fit import milli
from gangmaster.tools.snapshots import SnapshotError, load_snapshot

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "conf" / "snapshots"
FIX = ROOT / "tests" / "fixtures" / "snapshots"
SNAPSHOTS = [
    sorted((EXAMPLES / "slurm").glob("*.json")),
    sorted((EXAMPLES / "kubernetes").glob("*.json")),
    sorted((EXAMPLES / "yarn").glob("*.json")),
    [FIX / "slurm-24.05-scontrol-nodes.json", FIX / "slurm-24.05-squeue.json"],
    [FIX / "yarn-2.x-nodes.json"],
]
DOCS = {path: json.loads(path.read_text()) for files in SNAPSHOTS for path in files}

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

REPLACEMENTS = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.sampled_from([0, -1, 0.5, 1e308, 2 ** 33, 65]),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["two words", "", "gpu:v100:x", "dgx[9-1]", "15500m", "64Gi", "RUNNING", "DOWN", "NotReady"]),
    st.just([]), st.just({}), st.just({"set": True, "infinite": False, "number": 7}),
    st.just({"set": False, "infinite": False, "number": 0}), st.just(["IDLE", "DRAIN"]), st.just([{"x": 1}]),
)


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value in ``doc`` (keys and list indices)."""
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += paths(value, prefix + (i,))
    return found


PATHS = {path: paths(doc)[1:] for path, doc in DOCS.items()}


def value_at(doc: Any, where: tuple) -> Any:
    for step in where:
        doc = doc[step]
    return doc


#: The paths to numbers, where an amount too large to add up (1e308 vcores) would hide.
NUMBER_PATHS = {path: [w for w in found if isinstance(value_at(DOCS[path], w), (int, float))
                       and not isinstance(value_at(DOCS[path], w), bool)] for path, found in PATHS.items()}
EXTREMES = st.sampled_from([1e308, -1e308, 2 ** 70, 2 ** 53 + 1, -1, 0.5, 1e-300, 0])


def replaced(doc: Any, where: tuple, value: Any, remove: bool) -> Any:
    doc = json.loads(json.dumps(doc))
    parent = doc
    for step in where[:-1]:
        parent = parent[step]
    if remove and isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    return doc


def check(files: list[Path], changed: Path, content: bytes) -> None:
    """Load ``files`` with ``changed`` holding ``content``: a snapshot keeping its invariants,
    or a SnapshotError whose message starts with one of the files."""
    with tempfile.TemporaryDirectory() as folder:
        paths_now = []
        for path in files:
            copy = Path(folder) / path.name
            copy.write_bytes(content if path == changed else path.read_bytes())
            paths_now.append(copy)
        try:
            snap = load_snapshot(paths_now, taken_at=1795415335)
        except SnapshotError as exc:
            message = str(exc)
            assert any(message.startswith(str(p)) for p in paths_now), message
            assert "<object" not in message and "Traceback" not in message, message
            return
    hosts = [s.host for s in snap.specs]
    assert hosts and len(hosts) == len(set(hosts))
    capacity = {s.host: s for s in snap.specs}
    assert set(snap.unhealthy) <= set(hosts)
    totals: dict[str, list[int]] = {}
    for alloc in snap.running:
        assert alloc.host in capacity
        for amount in (alloc.vcores, alloc.memory_mb, alloc.gpus):
            assert math.isfinite(amount) and amount >= 0
        assert alloc.expected_end_s is None or alloc.expected_end_s >= 0
        total = totals.setdefault(alloc.host, [0, 0, 0])
        total[0] += milli(alloc.vcores)
        total[1] += alloc.memory_mb
        total[2] += alloc.gpus
    for host, (mvcores, memory, gpus) in totals.items():
        spec = capacity[host]
        assert mvcores <= milli(spec.vcores) and memory <= spec.memory_mb and gpus <= spec.gpus, host


def test_the_examples_load():
    for files in SNAPSHOTS:
        assert load_snapshot(files).specs


@FUZZ
@given(data=st.data(), value=REPLACEMENTS, remove=st.booleans())
def test_one_value_replaced_or_removed(data, value, remove):
    files = data.draw(st.sampled_from(SNAPSHOTS))
    changed = data.draw(st.sampled_from(files))
    where = data.draw(st.sampled_from(PATHS[changed]))
    check(files, changed, json.dumps(replaced(DOCS[changed], where, value, remove)).encode())


@FUZZ
@given(data=st.data(), value=EXTREMES)
def test_one_number_made_extreme(data, value):
    files = data.draw(st.sampled_from(SNAPSHOTS))
    changed = data.draw(st.sampled_from([f for f in files if NUMBER_PATHS[f]]))
    where = data.draw(st.sampled_from(NUMBER_PATHS[changed]))
    check(files, changed, json.dumps(replaced(DOCS[changed], where, value, False)).encode())


@FUZZ
@given(data=st.data())
def test_text_cut_short_or_random_bytes(data):
    files = data.draw(st.sampled_from(SNAPSHOTS))
    changed = data.draw(st.sampled_from(files))
    text = changed.read_bytes()
    content = data.draw(st.one_of(st.integers(0, len(text)).map(lambda n: text[:n]), st.binary(max_size=200)))
    check(files, changed, content)


#: The paths to objects with a key, where a key can be given twice.
OBJECT_PATHS = {path: [w for w in [()] + found if isinstance(value_at(DOCS[path], w), dict) and value_at(DOCS[path], w)]
                for path, found in PATHS.items()}
_AGAIN = "\x00again"          # a key no example has, written by json.dumps as "\u0000again"


def json_path(where: tuple) -> str:
    """``("nodes", 0, "cpus")`` as the readers name it: ``nodes[0].cpus``."""
    text = ""
    for step in where:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
    return text


@FUZZ
@given(data=st.data(), value=REPLACEMENTS)
def test_a_key_given_twice_is_refused_naming_it(data, value):
    files = data.draw(st.sampled_from(SNAPSHOTS))
    changed = data.draw(st.sampled_from(files))
    where = data.draw(st.sampled_from(OBJECT_PATHS[changed]))
    doc = json.loads(json.dumps(DOCS[changed]))
    target = value_at(doc, where)
    key = data.draw(st.sampled_from(sorted(target)))
    target[_AGAIN] = value
    text = json.dumps(doc).replace(json.dumps(_AGAIN), json.dumps(key))
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / changed.name
        copy.write_text(text)
        with pytest.raises(SnapshotError) as caught:
            load_snapshot([copy if path == changed else path for path in files], taken_at=1795415335)
    assert str(caught.value) == (f"{copy}: {json_path(where + (key,))}: expected each key once in an object; "
                                 f'"{key}" is given twice')
