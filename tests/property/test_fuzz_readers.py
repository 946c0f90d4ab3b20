"""Fuzzing every file reader: whatever the bytes, only a ConfigError comes out (issue 10).

Each reader gangmaster has -- job specs, cluster, queue, scenario and settings override
files, ``nvidia-smi topo -m`` text, topology presets, the RM state file and the trace
CSVs of ``gangmaster replay`` -- is fed
generated malformed input: random bytes, bytes that are not UTF-8, deep nesting, and
the shipped valid files with one field mutated (NaN, infinities, huge numbers, wrong
types, a key removed or an unknown one added) or their text cut and spliced. The
property: the reader returns, or raises ConfigError (or a subclass) whose message
names the file, and the field or line where the input has one. Any other exception --
a traceback on bad input -- fails the test. Job specs go through ``gangmaster
validate`` itself, which must print the message and exit 2.

Each test runs 60 examples (a few seconds in all); fuzz deeper with, e.g.,
``FUZZ_EXAMPLES=2000 python -m pytest tests/property/test_fuzz_readers.py``.
"""
from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.spec.jobspec import load_job
from gangmaster.protocol.rm_protocol import (AllocateRequest, ApplicationSubmission, LaunchContext,
                                       ResourceRequest)
from gangmaster.conf import conf_path
from gangmaster.conf.fields import ConfigError, ConfigErrors
from gangmaster.conf.settings import Settings
from gangmaster.gpu_topology.presets import load_preset_file
from gangmaster.gpu_topology.topo_text import read_topo_file
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.cli import main
from gangmaster.tools.rmsim import state
from gangmaster.tools.rmsim.clock import VirtualLoop
from gangmaster.tools.rmsim.ledger import NodeLedger
from gangmaster.tools.rmsim.nodemanager import SimulatedNodeManager
from gangmaster.tools.rmsim.queues import load_queues
from gangmaster.tools.rmsim.rm_settings import RMSettings
from gangmaster.tools.rmsim.scenario import Scenario
from gangmaster.tools.rmsim.simulation import Simulation
from gangmaster.tools.replay.openb import read_openb_nodes, read_openb_pods
from gangmaster.tools.replay.readers import read_trace
from gangmaster.tools.replay.trace import NodeShape
from gangmaster.tools.topo_cmd import configured_fallback_preset

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RM_CLUSTER = FIX / "rm" / "cluster.yaml"
SPECS = load_cluster_specs(RM_CLUSTER)
HOSTS = {s.host for s in SPECS}

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)), suppress_health_check=[HealthCheck.too_slow,
                                                        HealthCheck.function_scoped_fixture])


# ---------------------------------------------------------------- the readers
def read_job_via_validate(path: Path) -> None:
    """``gangmaster validate``: exit 0, or print the message naming the file and exit 2."""
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["validate", str(path)])
    assert status in (0, 2)
    if status == 2:
        assert f"{path}" in err.getvalue()
        raise ConfigError(str(path), "", "(re-raised for the property's checks)")
    load_job(path)          # valid for validate: valid for the AM as well


def read_settings(path: Path) -> None:
    """An override file, then every section typed as the commands type it."""
    merged = Settings(path)
    AMSettings.from_fields(merged.section("am"))
    SelectionSettings.from_fields(merged.section("selection"))
    RMSettings.from_fields(merged.section("rm"))
    BarrierConfig.from_fields(merged.section("barrier"))
    configured_fallback_preset(str(path))


def read_state(path: Path) -> None:
    loop = VirtualLoop()
    state.load(path, loop, SimulatedNodeManager(loop)).check_invariants()


READERS: dict[str, Callable[[Path], Any]] = {
    "job": read_job_via_validate,
    "cluster": load_cluster_specs,
    "queues": lambda path: load_queues(path, NodeLedger(SPECS)),
    "scenario": lambda path: Scenario.load(path, HOSTS),
    "settings": read_settings,
    "topo": read_topo_file,
    "preset": load_preset_file,
    "state": read_state,
}


def busy_state() -> dict:
    """A valid RM state with an app, asks, running and failed containers."""
    sim = Simulation.from_files(RM_CLUSTER)
    app = sim.client.submit(ApplicationSubmission("s", keep_containers_across_attempts=True))
    sim.client.register(app)
    resp = sim.client.allocate(AllocateRequest(app, 1, asks=(
        ResourceRequest(1, ResourceDescriptor(1024, 1.5, gpus=3, ports=2), count=3),
        ResourceRequest(2, ResourceDescriptor(1024, 1, gpus=8), host="dgx-000", relax_locality=False,
                        count=2)), blacklist_additions=("pcie-001",)))
    sim.client.start_container(resp.allocated[0].container_id, LaunchContext.of(["x"], env={"A": "1"}))
    sim.core.fail_container(resp.allocated[1].container_id, 9)
    return state.snapshot(sim.core)


#: Valid inputs of each reader, as data (the mutation tests change one field of a copy).
VALID_YAML: dict[str, list[Any]] = {
    "job": [yaml.safe_load(p.read_text()) for p in sorted(conf_path("jobs").glob("*.yaml"))
            if "story3" not in p.name]
           + [yaml.safe_load((FIX / "jobspec" / name).read_text())
              for name in ("openpai-pytorch-ps.yaml", "hived-style-completion.yaml")],
    "cluster": [yaml.safe_load(RM_CLUSTER.read_text()),
                yaml.safe_load(conf_path("clusters/default.yaml").read_text())],
    "queues": [yaml.safe_load((FIX / "rm" / "queues.yaml").read_text())],
    "scenario": [yaml.safe_load((FIX / "rm" / "scenario.yaml").read_text())],
    "settings": [yaml.safe_load(conf_path("defaults.yaml").read_text())],
    "preset": [yaml.safe_load(p.read_text()) for p in sorted(conf_path("topologies").glob("*.yaml"))],
}
VALID_STATE = busy_state()
VALID_TOPO = [p.read_text() for p in sorted((FIX / "topo").glob("*.txt"))]
VALID_TEXT = {kind: [yaml.safe_dump(d) for d in docs] for kind, docs in VALID_YAML.items()}
VALID_TEXT["topo"] = VALID_TOPO
VALID_TEXT["state"] = [json.dumps(VALID_STATE)]


def test_the_valid_inputs_are_valid():
    """The mutation tests start from these; they must load as they are."""
    for kind, texts in VALID_TEXT.items():
        for text in texts:
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / f"valid.{kind}"
                path.write_text(text)
                READERS[kind](path)


# ---------------------------------------------------------------- the property
def check_reader(kind: str, content: bytes, structured: bool = False) -> None:
    """``READERS[kind]`` on a file holding ``content`` returns or raises a ConfigError
    naming the file; ``structured``: the input parses, so each error names a field or
    a line too (the RM state file excepted: its errors name the file only)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzzed-{kind}.input"
        path.write_bytes(content)
        try:
            READERS[kind](path)
        except ConfigError as exc:
            assert str(exc).startswith(str(path)), str(exc)
            errors = exc.errors if isinstance(exc, ConfigErrors) else [exc]
            for error in errors:
                assert str(error).startswith(str(path)), str(error)
                if structured and kind not in ("state", "job"):
                    assert error.field, f"no field or line named: {error}"


KINDS = sorted(READERS)


@FUZZ
@given(kind=st.sampled_from(KINDS), content=st.binary(max_size=400))
def test_random_bytes(kind, content):
    check_reader(kind, content)


@FUZZ
@given(kind=st.sampled_from(KINDS), data=st.data())
def test_bytes_that_are_not_utf8(kind, data):
    text = data.draw(st.sampled_from(VALID_TEXT[kind])).encode()
    at = data.draw(st.integers(0, len(text)))
    bad = data.draw(st.binary(min_size=1, max_size=3).filter(lambda b: _not_utf8(b)))
    check_reader(kind, text[:at] + bad + text[at:])


def _not_utf8(chunk: bytes) -> bool:
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@FUZZ
@given(kind=st.sampled_from([k for k in KINDS if k != "topo"]), depth=st.integers(10, 5000),
       shape=st.sampled_from(["flow-list", "flow-map", "block-map", "json"]))
def test_deep_nesting(kind, depth, shape):
    if shape == "flow-list":
        text = "a: " + "[" * depth + "]" * depth
    elif shape == "flow-map":
        text = "a: " + "{a: " * depth + "1" + "}" * depth
    elif shape == "json":
        text = "[" * depth + "]" * depth
    else:
        text = "".join("  " * i + "a:\n" for i in range(min(depth, 300))) + "  " * min(depth, 300) + "1\n"
    check_reader(kind, text.encode())


@FUZZ
@given(kind=st.sampled_from(KINDS), data=st.data())
def test_cut_and_spliced_text(kind, data):
    """Valid text with a span removed, or repeated, or replaced by hostile text."""
    text = data.draw(st.sampled_from(VALID_TEXT[kind]))
    a = data.draw(st.integers(0, len(text)))
    b = data.draw(st.integers(a, min(len(text), a + 200)))
    splice = data.draw(st.one_of(st.just(""), st.just(text[a:b] * 2), st.sampled_from(HOSTILE_TEXT),
                                 st.text(max_size=30)))
    check_reader(kind, (text[:a] + splice + text[b:]).encode("utf-8", "surrogatepass"))


HOSTILE_TEXT = [".nan", ".inf", "-.inf", "1e400", "9" * 400, "&a [*a]", "*undefined", "!!python/object:os.system x",
                "{a: 1, a: 2}", "? [a]\n: 1", "2024-13-45", "\t", "\x00", "---\n", "%YAML 1.1\n", "- - - -",
                "NaN", "Infinity", "null", "[]", "{}", '"\\ud800"', "~", "0x7fffffffffffffff"]

HOSTILE_VALUES = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 0, -1, 1, 2 ** 31, 2 ** 63, 10 ** 100, -(10 ** 30),
                     1e308, 5e-324, True, False, None, "", " ", "x" * 300, "-1", "1e-9", [], {},
                     [[[[]]]], {"unknown": 1}, b"\x00\xff"]),
    st.integers(),
    st.floats(),
    st.text(max_size=10),
    st.lists(st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none()), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(-3, 3), max_size=3),
)


def locations(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every (path to a container, key or index) inside ``doc``; () for the document."""
    found: list[tuple] = [()]
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        found.append(path + (key,))
        found.extend(p for p in locations(value, path + (key,)) if p)
    return found


def mutate(doc: Any, data: st.DataObject) -> Any:
    """A copy of ``doc`` with one field replaced, removed, or an unknown key added."""
    doc = copy.deepcopy(doc)
    where = data.draw(st.sampled_from(locations(doc)))
    how = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]))
    value = data.draw(HOSTILE_VALUES)
    if not where:
        return value if how == "replace" else doc
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    key = where[-1]
    if how == "delete":
        del parent[key]
    elif how == "add" and isinstance(parent, dict):
        parent[data.draw(st.sampled_from(["unknownKey", "1", "name", "x"]))] = value
    else:
        parent[key] = value
    return doc


@FUZZ
@given(kind=st.sampled_from(sorted(VALID_YAML)), data=st.data())
def test_one_field_of_a_valid_file_mutated(kind, data):
    doc = mutate(data.draw(st.sampled_from(VALID_YAML[kind])), data)
    check_reader(kind, yaml.safe_dump(doc, allow_unicode=True).encode(), structured=True)


@FUZZ
@given(data=st.data())
def test_one_field_of_a_valid_state_file_mutated(data):
    doc = mutate(VALID_STATE, data)
    check_reader("state", json.dumps(doc, default=repr).encode())     # NaN, Infinity as JSON writes them


@FUZZ
@given(data=st.data())
def test_topo_text_with_cells_changed(data):
    """A ``topo -m`` matrix with cells replaced, rows dropped or doubled."""
    lines = data.draw(st.sampled_from(VALID_TOPO)).splitlines()
    for _ in range(data.draw(st.integers(1, 4))):
        k = data.draw(st.integers(0, len(lines) - 1))
        cells = lines[k].split("\t")
        action = data.draw(st.sampled_from(["cell", "drop", "double", "blank"]))
        if action == "cell":
            cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(
                st.sampled_from(["X", "NV99", "NV", "SOC", "", "GPU0", "GPU99", "mlx5_0", "NIC0", "N/A"]))
            lines[k] = "\t".join(cells)
        elif action == "drop":
            del lines[k]
        elif action == "double":
            lines.insert(k, lines[k])
        else:
            lines[k] = ""
        assume(lines)
    check_reader("topo", "\n".join(lines).encode())


# ---------------------------------------------------------------- trace CSVs (gangmaster replay)

SHAPE = NodeShape(8, 80.0, 524288)
#: Each trace reader: (header, a valid row, how to read a file).
TRACE_READERS: dict[str, tuple[str, str, Callable[[Path], Any]]] = {
    "philly": ("timestamp,duration,num_gpus,gpu_time,cluster", "2017-10-01 00:00:00,60,2,120,vc",
               lambda path: read_trace(path, "philly", SHAPE)),
    "tiresias": ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval", "0,1,0,6,vgg,10,3",
                 lambda path: read_trace(path, "tiresias", SHAPE)),
    "native": ("job_id,submit_s,duration_s,queue,role,instances,gpus,vcores,memory_mb,gpu_types",
               "a,0,10,q,w,1,1,2,1024,V100;T4", lambda path: read_trace(path, "native", SHAPE)),
    "openb pods": ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time",
                   "p,1000,1024,1,500,V100|T4,0,10", lambda path: read_openb_pods(path)),
    "openb pods, fill": ("name,cpu_milli,memory_mib,num_gpu,gpu_milli", "p,1000,1024,2,1000",
                         lambda path: read_openb_pods(path, need_times=False)),
    "openb nodes": ("sn,cpu_milli,memory_mib,gpu,model", "n,32000,131072,4,V100", read_openb_nodes),
}
#: What a field may become: text of any characters (control characters, quotes, commas,
#: line ends, a byte order mark), numbers that are not, and fields around the limits.
FIELD_VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "nan", "-inf", "1e308", "-1", "0", "1.5", "\ufeff", '"', '""', ",", "\r", "\n", ";;", "||",
                     "\x00", "\x1c", "\u2028", " "]),
    st.sampled_from([4_095, 4_096, 4_097, 131_072, 131_073, 200_000]).map(lambda n: "x" * n),
)


@FUZZ
@given(reader=st.sampled_from(sorted(TRACE_READERS)), data=st.data())
def test_a_trace_with_one_field_changed(reader, data):
    """One field of a valid row changed (quoted or not), the row doubled, a byte order mark or
    not: the reader returns or names the file and line; never a csv.Error or a traceback."""
    header, row, read = TRACE_READERS[reader]
    fields = row.split(",")
    column = data.draw(st.integers(0, len(fields) - 1))
    value = data.draw(FIELD_VALUES)
    fields[column] = '"' + value.replace('"', '""') + '"' if data.draw(st.booleans()) else value
    text = (data.draw(st.sampled_from(["", "\ufeff"])) + header + "\n" + ",".join(fields) + "\n" + row + "\n")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.csv"
        path.write_text(text, encoding="utf-8")
        try:
            read(path)
        except ConfigError as error:
            assert str(error).startswith(f"{path}:"), str(error)
            assert f"{path}: line " in str(error) or "at least one GPU node" in str(error), str(error)
