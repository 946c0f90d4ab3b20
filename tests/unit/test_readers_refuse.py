"""Every file reader refuses bad input with a ConfigError naming the file (issue 10).

Each case here was a traceback, a hang or a MemoryError before: non-UTF-8 bytes, deep
nesting, NaN and infinity, ``racks: []``, an unknown selector in ``--config``, a long job
name, duplicate keys (silently last-wins), alias bombs, unbounded instances and nodes,
``validate /dev/zero``, and a quadratic cost in the number of task roles. The CLI cases
go through ``gangmaster.tools.cli.main``, the entry point, and check status 2."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import re

import pytest
import yaml

import gangmaster.am
from gangmaster.am.spec.jobspec import load_job, read_job
from gangmaster.conf import conf_path, yaml_loader
from gangmaster.conf.fields import ConfigError, Fields, load_yaml, parse_yaml
from gangmaster.conf.limits import (MAX_CLUSTER_NODES, MAX_INSTANCES_PER_JOB, MAX_INSTANCES_PER_ROLE,
                                    MAX_JOB_NAME_LENGTH, MAX_YAML_ALIASES, MAX_YAML_DEPTH,
                                    MAX_YAML_FILE_BYTES)
from gangmaster.gpu_topology.topo_text import TopoFormatError, read_topo_file
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.cli import main
from gangmaster.tools.rmsim.ledger import NodeLedger
from gangmaster.tools.rmsim.queues import load_queues

FIX = Path(__file__).resolve().parents[1] / "fixtures"
JOB = conf_path("jobs/single-gpu.yaml")
SELECTORS = ["job-packing"]


def cli(capsys, *argv: str) -> tuple[int, str]:
    """Run ``gangmaster ARGV``; (status, stderr)."""
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().err


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def small_job(**changes) -> dict:
    data = {"protocolVersion": 2, "name": "small", "type": "job", "taskRoles": {"w": {
        "instances": 2, "resourcePerInstance": {"cpu": 1, "memoryMB": 1024, "gpu": 0},
        "commands": ["x"]}}}
    data.update(changes)
    return data


# ------------------------------------------------------------------ bytes and text
def test_non_utf8_yaml_is_refused_naming_file_and_line(tmp_path, capsys):
    path = write(tmp_path, "latin1.yaml", b"protocolVersion: 2\nname: caf\xe9\n")
    status, err = cli(capsys, "validate", path)
    assert status == 2
    assert f"{path}: line 2: expected UTF-8 text (byte 0xe9 at offset 28 is not)" in err


def test_non_utf8_topo_text_is_refused_naming_file_and_line(tmp_path):
    path = write(tmp_path, "topo.txt", (FIX / "topo" / "topo_dgx1_v100.txt").read_bytes() + b"\xff\n")
    with pytest.raises(TopoFormatError) as info:
        read_topo_file(path)
    assert isinstance(info.value, ConfigError)
    assert str(info.value).startswith(f"{path}: line ") and "UTF-8" in str(info.value)


def nested(levels: int) -> str:
    """A document of ``levels`` nested collections: the top mapping, then lists."""
    return "a: " + "[" * (levels - 1) + "]" * (levels - 1) + "\n"


def test_deep_nesting_is_refused_at_the_limit(tmp_path, capsys):
    value, depth = parse_yaml(nested(MAX_YAML_DEPTH), "f.yaml"), 0
    while isinstance(value, (dict, list)) and value:
        value, depth = (value["a"] if isinstance(value, dict) else value[0]), depth + 1
    assert depth + 1 == MAX_YAML_DEPTH          # the innermost list is empty
    with pytest.raises(ConfigError, match=f"f.yaml: line 1: expected at most {MAX_YAML_DEPTH} "
                                          "levels of nested lists and mappings"):
        parse_yaml(nested(MAX_YAML_DEPTH + 1), "f.yaml")
    # far past Python's recursion limit, through the CLI
    path = write(tmp_path, "deep.yaml", "a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    status, err = cli(capsys, "validate", path)
    assert status == 2 and "MAX_YAML_DEPTH" in err


# ------------------------------------------------------------------ duplicate keys, aliases
def test_a_duplicate_key_is_refused_naming_both_lines(tmp_path, capsys):
    text = ("protocolVersion: 2\nname: dup\ntype: job\ntaskRoles:\n  w:\n    instances: 2\n"
            "    resourcePerInstance: {cpu: 1, memoryMB: 1, gpu: 0}\n    commands: [x]\n"
            "    instances: 200\n")
    path = write(tmp_path, "dup.yaml", text)
    status, err = cli(capsys, "validate", path)
    assert status == 2
    assert f'{path}: line 9: expected each key once in a mapping; "instances" is also on line 6' in err


def test_merge_keys_may_still_override_what_they_merge():
    data = parse_yaml("base: &b {cpu: 1, gpu: 0}\nrole:\n  <<: *b\n  cpu: 4\n", "m.yaml")
    assert data["role"] == {"cpu": 4, "gpu": 0}


def test_an_alias_bomb_is_refused():
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 10):      # each level 10x the last: 10^10 values once expanded
        prev, name = chr(ord("a") + k - 1), chr(ord("a") + k)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    with pytest.raises(ConfigError, match="MAX_YAML_NODES"):
        parse_yaml("\n".join(lines), "bomb.yaml")


def test_too_many_aliases_are_refused():
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\n"
    with pytest.raises(ConfigError, match="MAX_YAML_ALIASES"):
        parse_yaml(text, "many.yaml")


def test_a_structure_that_contains_itself_is_refused():
    with pytest.raises(ConfigError, match="r.yaml: line 1: expected no alias inside its own anchor"):
        parse_yaml("a: &a [1, *a]\n", "r.yaml")


def test_a_value_yaml_cannot_build_names_its_line():
    with pytest.raises(ConfigError, match="v.yaml: line 2: expected valid YAML \\(cannot read "
                                          "'2024-13-01' as timestamp"):
        parse_yaml("a: 1\nwhen: 2024-13-01\n", "v.yaml")


# ------------------------------------------------------------------ numbers
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 10 ** 400])
def test_fields_number_refuses_what_is_not_a_finite_number(value):
    with pytest.raises(ConfigError, match="f.yaml: x: expected a finite number"):
        Fields({"x": value}, "f.yaml").number("x")


def cluster(tmp_path: Path, *groups: dict) -> Path:
    """A cluster file of these node groups (each on top of a small valid group)."""
    base = {"name": "g", "count": 2, "rack": "r", "memoryMB": 65536, "vcores": 16}
    return write(tmp_path, "cluster.yaml", yaml.safe_dump(
        {"name": "t", "nodeGroups": [dict(base, name=f"g{i}", **g) for i, g in enumerate(groups)]}))


@pytest.mark.parametrize("field,value", [("vcores", float("nan")), ("vcores", float("inf")),
                                         ("memoryMB", 2 ** 40)])
def test_cluster_numbers_must_be_finite_and_bounded(tmp_path, capsys, field, value):
    path = cluster(tmp_path, {field: value})
    status, err = cli(capsys, "run", JOB, "--cluster", path, "--work-dir", tmp_path / "w")
    assert status == 2
    assert f"{path}: nodeGroups[0].{field}: expected a" in err


@pytest.mark.parametrize("queue,field", [("{name: q, vcores: .nan}", "vcores"), ("{name: q, machines: .inf}", "machines"),
                                         ("{name: q, memoryMB: .inf}", "memoryMB")])
def test_queue_numbers_must_be_finite(tmp_path, queue, field):
    path = write(tmp_path, "queues.yaml", f"queues: [{queue}]\n")
    ledger = NodeLedger(load_cluster_specs(FIX / "rm" / "cluster.yaml"))
    with pytest.raises(ConfigError, match=f"queues.yaml: queues\\[0\\].{field}: expected a"):
        load_queues(path, ledger)


QUEUE_PREEMPTION = [
    # (queue, what it reads as: (priority, guaranteed GPUs), or the message of its refusal)
    ("{name: q}", (0, 0)),
    ("{name: q, priority: 7, gpus: 16, guaranteedGpus: 8}", (7, 8)),
    ("{name: q, priority: 1001}", "queues[0].priority: expected an integer <= 1,000 (MAX_PRIORITY"),
    ("{name: q, gpus: 4, guaranteedGpus: 5}", "queues[0].guaranteedGpus: expected an integer within 0..4, got 5"),
    ("{name: q, guaranteedGpus: -1}", "queues[0].guaranteedGpus: expected an integer >= 0, got -1"),
]


@pytest.mark.parametrize("queue,expected", QUEUE_PREEMPTION)
def test_queue_priority_and_guaranteed_share(tmp_path, queue, expected):
    path = write(tmp_path, "queues.yaml", f"queues: [{queue}]\n")
    ledger = NodeLedger(load_cluster_specs(FIX / "rm" / "cluster.yaml"))
    if isinstance(expected, str):
        with pytest.raises(ConfigError, match=re.escape(expected)):
            load_queues(path, ledger)
    else:
        (q,) = load_queues(path, ledger)
        assert (q.priority, q.guaranteed_gpus) == expected


QUEUE_POLICY = [
    # (queue [, the file's other keys], what it reads as: (policy, max reservations, reserve after s,
    # cluster reservations), or the message of its refusal)
    ("{name: q}", ("fifo", 1, 0.0, 1)),
    ("{name: q, policy: reserve, maxReservations: 3}", ("reserve", 3, 0.0, 1)),
    ("{name: q, policy: reserve, reserveAfterSeconds: 600}\nclusterReservations: 4", ("reserve", 1, 600.0, 4)),
    ("{name: q, reserveAfterSeconds: 60}",
     "queues[0].reserveAfterSeconds: expected to be used together with policy: reserve"),
    ("{name: q, policy: reserve, reserveAfterSeconds: -1}", "queues[0].reserveAfterSeconds: expected a number >= 0"),
    ("{name: q, policy: reserve}\nclusterReservations: 0", "clusterReservations: expected an integer >= 1, got 0"),
    ("{name: q}\nclusterReservations: 2",
     "clusterReservations: expected to be used together with a queue of policy: reserve"),
    ("{name: q, policy: backfill}", 'queues[0].policy: expected one of fifo, reserve, got "backfill"'),
    ("{name: q, policy: reserve, maxReservations: 0}", "queues[0].maxReservations: expected an integer >= 1, got 0"),
    ("{name: q, policy: reserve, maxReservations: 65}",
     "queues[0].maxReservations: expected an integer <= 64 (MAX_RESERVATIONS"),
    ("{name: q, maxReservations: 2}", "queues[0].maxReservations: expected to be used together with policy: reserve"),
]


@pytest.mark.parametrize("queue,expected", QUEUE_POLICY)
def test_queue_policy_and_max_reservations(tmp_path, queue, expected):
    queue, _, rest = queue.partition("\n")
    path = write(tmp_path, "queues.yaml", f"queues: [{queue}]\n{rest}\n")
    ledger = NodeLedger(load_cluster_specs(FIX / "rm" / "cluster.yaml"))
    if isinstance(expected, str):
        with pytest.raises(ConfigError, match=re.escape(expected)):
            load_queues(path, ledger)
    else:
        (q,) = load_queues(path, ledger)
        assert (q.policy, q.max_reservations, q.reserve_after_s, q.cluster_reservations) == expected


# ------------------------------------------------------------------ shapes and names
def test_an_empty_rack_list_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"nodeGroups\[0\].racks: expected at least one rack name"):
        load_cluster_specs(cluster(tmp_path, {"racks": []}))


def test_an_unknown_selector_in_config_is_refused_before_the_run(tmp_path, capsys):
    from gangmaster.selectors.selector import selector_classes
    config = write(tmp_path, "config.yaml", "selection:\n  selector: fastest\n")
    status, err = cli(capsys, "run", JOB, "--config", config, "--work-dir", tmp_path / "w")
    assert status == 2
    assert (f'{config}: selection.selector: expected one of {", ".join(selector_classes())}, '
            'got "fastest"') in err
    assert not (tmp_path / "w").exists()          # refused before anything ran


def test_a_job_name_past_the_limit_is_refused(capsys, tmp_path):
    long_name = "j" * 300
    path = write(tmp_path, "long.yaml", yaml.safe_dump(small_job(name=long_name)))
    status, err = cli(capsys, "validate", path)
    assert status == 2
    assert (f"{path}: name: expected a name of at most {MAX_JOB_NAME_LENGTH} characters "
            "(MAX_JOB_NAME_LENGTH in conf/limits.py), got \"300 characters\"") in err
    ok = read_job(small_job(name="j" * MAX_JOB_NAME_LENGTH), "ok.yaml", selectors=SELECTORS)
    assert len(ok.name) == MAX_JOB_NAME_LENGTH


def test_a_name_with_a_trailing_newline_is_not_a_name():
    from gangmaster.am.spec.jobspec import JobSpecError
    with pytest.raises(JobSpecError, match="name: expected a name of letters"):
        read_job(small_job(name="job\n"), "n.yaml", selectors=SELECTORS)


# ------------------------------------------------------------------ unbounded inputs
def test_a_billion_instances_are_refused_by_validate(tmp_path, capsys):
    data = small_job()
    data["taskRoles"]["w"]["instances"] = 1_000_000_000
    path = write(tmp_path, "huge.yaml", yaml.safe_dump(data))
    status, err = cli(capsys, "validate", path)
    assert status == 2
    assert (f"{path}: taskRoles.w.instances: expected an integer <= {MAX_INSTANCES_PER_ROLE:,} "
            "(MAX_INSTANCES_PER_ROLE in conf/limits.py), got 1000000000") in err


def test_instances_are_bounded_per_job_as_well():
    from gangmaster.am.spec.jobspec import JobSpecError
    per_role = MAX_INSTANCES_PER_JOB // 2 + 1
    data = small_job()
    data["taskRoles"] = {name: dict(data["taskRoles"]["w"], instances=per_role) for name in ("a", "b")}
    with pytest.raises(JobSpecError, match=f"taskRoles: expected at most {MAX_INSTANCES_PER_JOB:,} "
                                           "instances in all"):
        read_job(data, "j.yaml", selectors=SELECTORS)


def test_story3_is_well_within_the_limits():
    job = load_job(conf_path("jobs/story3-parameter-server.yaml"))
    nodes = load_cluster_specs(conf_path("clusters/story3.yaml"))
    assert job.total_instances * 10 < MAX_INSTANCES_PER_JOB
    assert len(nodes) * 100 < MAX_CLUSTER_NODES


def test_a_billion_node_group_is_refused_before_any_node_is_made(tmp_path):
    with pytest.raises(ConfigError, match=r"nodeGroups\[0\].count: expected at most 1,000,000 nodes "
                                          r"in the cluster file.*got 1000000000"):
        load_cluster_specs(cluster(tmp_path, {"count": 1_000_000_000}))


def test_nodes_are_bounded_over_all_groups(tmp_path):
    half = MAX_CLUSTER_NODES // 2 + 1
    with pytest.raises(ConfigError, match=r"nodeGroups\[1\].count: expected at most 1,000,000 nodes"):
        load_cluster_specs(cluster(tmp_path, {"count": half}, {"count": half}))


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "directory"])
def test_validate_refuses_what_is_not_a_regular_file(tmp_path, capsys, special):
    if special == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)                     # opening it for reading would block forever
        kind = "a FIFO"
    elif special == "directory":
        path, kind = tmp_path, "a directory"
    else:
        path, kind = Path(special), "a character device"
    status, err = cli(capsys, "validate", path)
    assert status == 2
    assert f"{path}: expected a regular file, not {kind}" in err


def test_a_file_past_the_size_limit_is_refused(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as f:
        f.write(b"# padding\n" * (MAX_YAML_FILE_BYTES // 10 + 1))
    status, err = cli(capsys, "validate", path)
    assert status == 2
    assert f"{path}: expected a file of at most {MAX_YAML_FILE_BYTES:,} bytes (MAX_YAML_FILE_BYTES" in err
    with pytest.raises(ConfigError, match="MAX_YAML_FILE_BYTES"):
        load_yaml(path)


def _lines_executed(function, *args) -> int:
    """Lines of gangmaster code run by ``function(*args)``: a count of work, not a time."""
    root = str(Path(gangmaster.am.__file__).resolve().parents[1])   # the installed package, wherever it is
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if not frame.f_code.co_filename.startswith(root) or "/tests/" in frame.f_code.co_filename:
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        function(*args)
    finally:
        sys.settrace(None)
    return count


def test_validating_a_job_costs_work_linear_in_its_roles():
    """A 2 MB spec of many roles took ~50 s: each role lookup scanned every role."""
    from gangmaster.tools.validate_cmd import render

    def many_roles(n: int) -> dict:
        role = small_job()["taskRoles"]["w"]
        return small_job(taskRoles={f"r{i}": dict(role) for i in range(n)},
                         gangmaster={"gangs": [[f"r{i}" for i in range(n)]]})

    def validate(data):
        render(read_job(data, "many.yaml", selectors=SELECTORS))

    small, large = _lines_executed(validate, many_roles(300)), _lines_executed(validate, many_roles(1200))
    assert large < 4.5 * small, (small, large)     # 4x the roles: ~4x the work, not ~16x


LOADERS = [yaml_loader.PythonStrictLoader] + ([yaml_loader.CStrictLoader] if yaml_loader.CParser else [])


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("text,line,expected", [
    ("a: 1\nb:\n  c: 2\n  c: 3\n", 4, 'each key once in a mapping; "c" is also on line 3'),
    (nested(MAX_YAML_DEPTH + 1), 1, f"at most {MAX_YAML_DEPTH} levels"),
    ("a: &a [1, *a]\n", 1, "no alias inside its own anchor"),
    ("a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\n", 2, "at most 1000 aliases"),
])
def test_both_event_sources_refuse_the_same(loader, text, line, expected):
    """libyaml when PyYAML has it, PyYAML's own parser when not: the same refusals."""
    with pytest.raises(yaml_loader.YAMLRefused) as info:
        yaml_loader.load(text, loader)
    assert info.value.problem_mark.line + 1 == line and expected in info.value.expected


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
def test_both_event_sources_load_what_safe_load_loads(loader):
    text = (conf_path("jobs/parameter-server.yaml").read_text() + "\nanchors: {a: &x [1, 2], b: *x}\n"
            "merged: {<<: {p: 1, q: 2}, q: 3}\nwhen: 2024-01-02\n")
    assert yaml_loader.load(text, loader) == yaml.safe_load(text)


# ------------------------------------------------------------------ trace files (gangmaster replay)
OPENB_NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,4,V100\n"
OPENB_PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\n"
GIANT = "g" * 200_000     # past the csv module's own field limit (131,072), which raised _csv.Error (exit 1)


@pytest.mark.parametrize("trace, nodes, flags, expected", [
    ("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,60,1,60," + GIANT + "\n", None,
     ["--format", "philly", "--nodes", "1"], "t.csv: line 2: cluster: expected a field of at most 4,096"),
    ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,6," + GIANT + ",10,3\n", None,
     ["--format", "tiresias", "--nodes", "1"], "t.csv: line 2: model_name: expected a field of at most 4,096"),
    ("job_id,submit_s,duration_s,gpus,queue\na,0,10,1," + GIANT + "\n", None,
     ["--format", "native", "--nodes", "1"], "t.csv: line 2: queue: expected a field of at most 4,096"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + GIANT + ",1000,1024,1,1000\n", OPENB_NODES,
     ["--format", "openb", "--mode", "fill"], "t.csv: line 2: name: expected a field of at most 4,096"),
    (OPENB_PODS, "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,4," + GIANT + "\n",
     ["--format", "openb", "--mode", "fill"], "nodes.csv: line 2: model: expected a field of at most 4,096"),
    (OPENB_PODS, OPENB_NODES, ["--format", "openb"],
     "t.csv: line 1: expected a header with the columns name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,"
     "deletion_time (missing: creation_time,deletion_time); --mode time submits each pod at its creation_time"),
    ("\ufeffname,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,0,0,0,0\n", OPENB_NODES,
     ["--format", "openb", "--mode", "fill"],
     "t.csv: line 2: cpu_milli: expected cpu_milli, memory_mib or num_gpu > 0 (a pod that asks for nothing)"),
], ids=["philly", "tiresias", "native", "openb-pods", "openb-nodes", "openb-time-without-times", "openb-bom-empty-pod"])
def test_a_hostile_trace_is_refused_with_status_2_naming_file_line_and_field(tmp_path, capsys, trace, nodes, flags,
                                                                            expected):
    path = write(tmp_path, "t.csv", trace)
    argv = ["replay", path, *flags]
    if nodes is not None:
        argv += ["--nodes-file", write(tmp_path, "nodes.csv", nodes)]
    status, err = cli(capsys, *argv)
    assert status == 2 and expected in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
