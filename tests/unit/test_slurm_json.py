"""Reading Slurm's JSON: output captured from Slurm 22.05.8 (tests/fixtures/slurm/), and the
shapes newer versions write (wrapped numbers, state lists, exit-code objects), by hand."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gangmaster.protocol.rm_protocol import NodeState
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.tools.slurm.client import SlurmRMClient
from gangmaster.tools.slurm.slurm_json import SlurmJSONError, read_jobs, read_nodes, slurm_version
from gangmaster.tools.slurm.values import GresEntry, indices, number, state_words

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_idle_nodes_of_slurm_22_05():
    text = fixture("sinfo-22.05-idle.json")
    assert slurm_version(text) == "22.05.8"
    nodes = {n.name: n for n in read_nodes(text)}
    assert sorted(nodes) == ["cpu-000", "dgx-000", "dgx-001"]
    dgx = nodes["dgx-000"]
    assert (dgx.cpus, dgx.memory_mb, dgx.gpus, dgx.gpu_type, dgx.per_gpu_types) == (16, 65536, 4, "V100", True)
    assert dgx.features == ("rack.rack-a", "topo.dgx1-v100", "nvlink")
    assert dgx.idle and dgx.usable and not dgx.used_gpus
    cpu = nodes["cpu-000"]
    assert (cpu.gpus, cpu.gpu_type, cpu.per_gpu_types) == (0, None, False)


def test_busy_nodes_name_the_gpus_in_use():
    nodes = {n.name: n for n in read_nodes(fixture("sinfo-22.05-busy.json"))}
    assert nodes["dgx-000"].used_gpus == {1, 3} and nodes["dgx-000"].states == {"MIXED"}
    assert (nodes["dgx-000"].alloc_cpus, nodes["dgx-000"].alloc_memory_mb) == (4, 2048)
    assert nodes["dgx-001"].used_gpus == {2}


def test_the_client_reports_a_node_as_the_am_knows_nodes(tmp_path):
    client = SlurmRMClient(tmp_path, task_ports="20000-20009")
    [report] = [client.node_report(n, {}) for n in read_nodes(fixture("sinfo-22.05-busy.json")) if n.name == "dgx-000"]
    assert (report.rack, report.labels, report.topology, report.gpu_type) == ("rack-a", {"nvlink"}, "dgx1-v100", "V100")
    assert report.state is NodeState.RUNNING
    assert report.capacity.gpu_mask == 0b1111 and report.free.gpu_mask == 0b0101
    assert (report.free.vcores, report.free.memory_mb) == (12, 63488)
    assert report.free.port_ranges.count == 10


def test_jobs_of_slurm_22_05_running_and_pending():
    running = read_jobs(fixture("squeue-22.05-running.json"))
    assert [(j.job_id, j.leader, j.het_offset) for j in running] == [(1, 1, 0), (2, 1, 1)]
    assert all(j.running for j in running)
    assert running[0].gpu_indices == (1, 3) and running[1].gpu_indices == (2,)
    by_name = {}
    for job in read_jobs(fixture("squeue-22.05-pending.json")):
        by_name.setdefault(job.name, []).append(job)
    pending = by_name["gm-pend2"]
    assert [j.pending for j in pending] == [True, True] and pending[0].reason == "Resources"
    assert by_name["gm-imp"][0].ended and by_name["gm-imp"][0].reason == "BadConstraints"


# ------------------------------------------------------------ newer schema shapes
def newer_node(**changes) -> dict:
    node = {"name": "n1", "state": ["MIXED"], "cpus": {"set": True, "infinite": False, "number": 8},
            "alloc_cpus": {"set": True, "infinite": False, "number": 2}, "real_memory": {"set": True, "number": 4096},
            "alloc_memory": 1024, "features": ["rack.r1", "fast"], "active_features": ["rack.r1", "fast"],
            "gres": "gpu:a100:4(S:0-1)", "gres_used": "gpu:a100:2(IDX:0,2)", "partitions": ["p"],
            "reason": {"description": "", "set_by": ""}}
    node.update(changes)
    return node


def test_wrapped_numbers_state_lists_and_feature_lists():
    [node] = read_nodes(json.dumps({"nodes": [newer_node()], "errors": []}))
    assert (node.cpus, node.alloc_cpus, node.memory_mb, node.alloc_memory_mb) == (8, 2, 4096, 1024)
    assert node.states == {"MIXED"} and node.usable
    assert node.features == ("rack.r1", "fast")
    assert (node.gpu_type, node.gpus, node.per_gpu_types, node.used_gpus) == ("a100", 4, False, {0, 2})


@pytest.mark.parametrize("state, usable, lost", [
    (["IDLE", "DRAIN"], False, False), ("idle+drain", False, False), (["DOWN", "NOT_RESPONDING"], False, True),
    ("down*", False, True), ("mixed", True, False), (["ALLOCATED", "COMPLETING"], True, False)])
def test_node_states_in_every_shape(state, usable, lost):
    [node] = read_nodes(json.dumps({"nodes": [newer_node(state=state)]}))
    assert (node.usable, node.lost) == (usable, lost)


def test_job_records_of_newer_versions():
    raw = {"job_id": 7, "het_job_id": {"set": True, "number": 7}, "het_job_offset": {"set": True, "number": 1},
           "name": "gm-x", "job_state": ["NODE_FAIL"], "state_reason": "NodeDown", "nodes": "n2",
           "exit_code": {"status": ["SIGNALED"], "return_code": {"set": True, "number": 0},
                         "signal": {"id": {"set": True, "number": 9}, "name": "KILL"}},
           "gres_detail": ["gpu:a100:1(IDX:3)"]}
    [job] = read_jobs(json.dumps({"jobs": [raw]}))
    assert (job.leader, job.het_offset, job.node_failed, job.ended, job.running) == (7, 1, True, True, False)
    assert (job.exit_code, job.signal, job.gpu_indices) == (0, 9, (3,))


def test_unset_and_infinite_numbers_read_as_the_default():
    assert number({"set": False, "infinite": False, "number": 5}) == 0
    assert number({"set": True, "infinite": True, "number": 0}, default=-1) == -1
    assert number("12") == 12 and number(None, 3) == 3 and number(True, 4) == 4


@pytest.mark.parametrize("text, entry", [
    ("gpu:V100_3:1(IDX:3)", GresEntry("gpu", "V100_3", 1, (3,))),
    ("gpu:2(IDX:0-1)", GresEntry("gpu", None, 2, (0, 1))),
    ("gpu:a100:0(IDX:N/A)", GresEntry("gpu", "a100", 0, ())),
    ("gpu", GresEntry("gpu", None, 1, ())),
    ("gpu:a100:8(S:0-1)", GresEntry("gpu", "a100", 8, ()))])
def test_gres_entries(text, entry):
    assert GresEntry.parse(text) == entry


def test_index_lists_and_state_words():
    assert indices("0,2-4,7") == [0, 2, 3, 4, 7] and indices("N/A") == []
    assert set(state_words("down*+drain", ["NOT_RESPONDING"])) == {"DOWN", "DRAIN", "NOT_RESPONDING"}


@pytest.mark.parametrize("text, message", [
    ("not json", "not JSON"), ("[]", "expected an object with a 'nodes' list"),
    ('{"nodes": {}}', "expected an object with a 'nodes' list"),
    ('{"nodes": [{"state": "idle"}]}', "nodes[0] has no name"),
    ('{"nodes": [], "errors": [{"error": "Unable to contact slurm controller"}]}', "Slurm reported"),
    ('{"nodes": [{"name": "n1", "cpus": 8, "cpus": 4000}]}',
     'node list: nodes[0].cpus: expected each key once in an object; "cpus" is given twice'),
    ('{"nodes": [], "nodes": [{"name": "n1"}]}',
     'node list: nodes: expected each key once in an object; "nodes" is given twice')])
def test_what_is_not_understood_is_said(text, message):
    with pytest.raises(SlurmJSONError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_nodes(text)


def test_the_gres_asked_names_exact_gpus_only_where_the_node_has_per_gpu_types():
    from dataclasses import replace

    from gangmaster.tools.slurm.client import gres_request

    [exact] = [n for n in read_nodes(fixture("sinfo-22.05-idle.json")) if n.name == "dgx-000"]
    asks = [ResourceDescriptor(512, 1, 1, 0b0100), ResourceDescriptor(512, 1, 2, 0b1001)]
    assert gres_request(asks, exact) == "gpu:V100_0:1,gpu:V100_2:1,gpu:V100_3:1"
    plain = replace(exact, per_gpu_types=False, gpu_type="a100")
    assert gres_request(asks, plain) == "gpu:a100:3"
    assert gres_request(asks, replace(plain, gpu_type="gpu")) == "gpu:3"
    assert gres_request([ResourceDescriptor(512, 1)], exact) == ""
