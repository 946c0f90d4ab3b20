"""Reading real clusters' snapshots (tools/snapshots/): each engine's JSON to the same
ClusterSnapshot, asserted on the numbers of the shipped examples, and every kind of bad
input refused with the file, the JSON path and what was expected."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import gangmaster.tools.snapshots as snapshots
from gangmaster.conf.fields import ConfigError
from gangmaster.tools.snapshot_cmd import to_json
from gangmaster.tools.snapshots import UNATTRIBUTED, RunningAllocation, SnapshotError, load_snapshot
from gangmaster.tools.snapshots.attribution import reconcile
from gangmaster.tools.snapshots.kubernetes import _quantity
from gangmaster.tools.snapshots.json_doc import Value
from gangmaster.tools.snapshots.model import Usage
from gangmaster.tools.snapshots.slurm import _gres, expand_hostlist
from gangmaster.selectors.cluster import NodeSpec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "conf" / "snapshots"
FIX = ROOT / "tests" / "fixtures" / "snapshots"
SLURM = [EXAMPLES / "slurm" / "sinfo.json", EXAMPLES / "slurm" / "squeue.json"]
SLURM_24 = [FIX / "slurm-24.05-scontrol-nodes.json", FIX / "slurm-24.05-squeue.json"]
K8S = [EXAMPLES / "kubernetes" / "nodes.json", EXAMPLES / "kubernetes" / "pods.json"]
YARN = [EXAMPLES / "yarn" / "nodes.json", EXAMPLES / "yarn" / "apps.json",
        EXAMPLES / "yarn" / "containers-resnet50-train.json"]
#: When the Slurm 22.05 example was dumped (`date +%s` right after squeue --json).
SLURM_TAKEN_AT = 1795415335


def by_host(snap):
    return {s.host: s for s in snap.specs}


def held(snap, job):
    return sorted((a.host, a.vcores, a.memory_mb, a.gpus, a.expected_end_s) for a in snap.running if a.job == job)


def write(tmp_path, name, doc) -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


# ------------------------------------------------------------------ Slurm
def test_slurm_22_05_as_captured_from_a_real_slurmctld():
    snap = load_snapshot(SLURM, taken_at=SLURM_TAKEN_AT)
    assert snap.format == "slurm" and snap.taken_at_from == "given"
    nodes = by_host(snap)
    assert sorted(nodes) == ["cpu1", "cpu2", "dgx1", "dgx2"]
    dgx1 = nodes["dgx1"]
    assert (dgx1.vcores, dgx1.memory_mb, dgx1.gpus, dgx1.gpu_type, dgx1.rack) == (16.0, 64000, 8, "v100", "rack1")
    assert dgx1.labels == {"rack1", "nvlink", "gpu", "all"}          # features and partitions
    assert dgx1.ports == snapshots.NODE_PORTS                         # no engine reports ports: none block
    assert (nodes["cpu1"].gpus, nodes["cpu1"].gpu_type, nodes["cpu1"].rack) == (0, None, "rack2")
    assert snap.unhealthy == {"cpu2": "DOWN+NOT_RESPONDING", "dgx2": "DRAIN"}   # dgx2 is "mixed" + DRAIN
    assert snap.unhealthy_reasons == {"cpu2": "Not responding", "dgx2": "ECC errors on GPU 3"}
    assert held(snap, "trainer") == [("dgx1", 4.0, 8000, 2, 7071.0)]
    assert held(snap, "eval") == [("dgx2", 2.0, 16000, 1, 2591.0)]
    assert held(snap, "allreduce") == [("cpu1", 2.0, 2000, 0, 5397.0), ("dgx1", 2.0, 2000, 0, 5397.0)]
    assert held(snap, "etl") == [("cpu1", 2.0, 4000, 0, 1671.0)]
    assert {a.job for a in snap.running} == {"trainer", "eval", "allreduce", "etl"}   # pending bigjob holds nothing
    assert snap.notes == ()          # squeue accounts for every node's alloc_cpus/alloc_memory/gres_used


def test_slurm_24_05_wrapped_numbers_state_lists_and_its_own_time():
    snap = load_snapshot(SLURM_24)
    assert snap.taken_at == 1795415335.0 and snap.taken_at_from == "the files' own time"
    nodes = by_host(snap)
    assert (nodes["a100-01"].vcores, nodes["a100-01"].memory_mb, nodes["a100-01"].gpus) == (64.0, 1031000, 8)
    assert nodes["a100-01"].gpu_type == "a100" and nodes["a100-01"].rack == "rack3"
    assert snap.unhealthy == {"a100-03": "DRAIN", "a100-04": "DOWN+NOT_RESPONDING"}
    assert "cpu-01" not in snap.unhealthy            # IDLE+POWERED_DOWN: Slurm powers it up on demand
    assert held(snap, "llm-finetune") == [("a100-01", 32.0, 500000, 4, 5400.0), ("a100-02", 32.0, 500000, 4, 5400.0)]


def test_slurm_node_usage_without_squeue_is_unattributed():
    snap = load_snapshot(SLURM[:1], taken_at=SLURM_TAKEN_AT)
    assert held(snap, UNATTRIBUTED) == [("cpu1", 4.0, 6000, 0, None), ("dgx1", 6.0, 10000, 2, None),
                                        ("dgx2", 2.0, 16000, 1, None)]
    assert any("squeue" in note for note in snap.notes)


def test_slurm_network_domains_come_from_net_features(tmp_path):
    doc = json.loads(SLURM_24[0].read_text())
    doc["nodes"][0]["active_features"] = ["rack1", "net.switch.leaf-1", "net.block.b0", "net.bad"]
    spec = by_host(load_snapshot([write(tmp_path, "nodes.json", doc)]))["a100-01"]
    assert (spec.rack, spec.domains) == ("rack1", (("switch", "leaf-1"), ("block", "b0")))


def test_slurm_unknown_state_words_make_a_node_unavailable(tmp_path):
    doc = json.loads(SLURM_24[0].read_text())
    doc["nodes"][0]["state"] = ["MIXED", "SOMETHING_NEW"]
    doc["nodes"][1]["state"] = []
    snap = load_snapshot([write(tmp_path, "nodes.json", doc)])
    assert snap.unhealthy["a100-01"] == "SOMETHING_NEW"
    assert snap.unhealthy["a100-02"] == "(no state)"


@pytest.mark.parametrize("gres, count, gpu_type", [
    ("gpu:v100:8(S:0-1)", 8, "v100"),
    ("gpu:4", 4, None),
    ("gpu", 1, None),
    ("gpu:a100:4,gpu:a100:4(S:1)", 8, "a100"),
    ("gpu:v100:4,gpu:a100:4", 8, None),                        # two models: no single type
    ("gpu:v100_0:1,gpu:v100_1:1,gpu:v100_2:1", 3, "v100"),    # one GRES type per GPU
    ("gpu:v100:2(IDX:0-1),mps:200", 2, "v100"),
    ("gpu:(null):0(IDX:N/A)", 0, None),
    ("", 0, None),
])
def test_slurm_gres_strings(gres, count, gpu_type):
    assert _gres(Value({"gres": gres}, "f"), "gres") == (count, gpu_type)


@pytest.mark.parametrize("text, hosts", [
    ("dgx1", ["dgx1"]),
    ("dgx[1-3]", ["dgx1", "dgx2", "dgx3"]),
    ("dgx[01-02,07],cpu1", ["dgx01", "dgx02", "dgx07", "cpu1"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("", []),
])
def test_slurm_hostlists(text, hosts):
    assert expand_hostlist(text, Value({}, "f"), "nodes") == hosts


@pytest.mark.parametrize("text", ["dgx[3-1]", "dgx[a-b]", "dgx[1-2", "n[0-99999999999]", "a[1-1000]b[1-1000]c[1-2]"])
def test_slurm_bad_or_enormous_hostlists_are_refused(text):
    with pytest.raises(SnapshotError, match="hostlist"):
        expand_hostlist(text, Value({}, "f", "jobs[0]"), "nodes")


def test_slurm_sinfo_of_23_11_is_refused_with_advice(tmp_path):
    path = write(tmp_path, "sinfo.json", {"sinfo": [{"node": {"state": ["IDLE"]}, "nodes": {"nodes": ["n1"]}}],
                                          "meta": {}, "errors": []})
    with pytest.raises(SnapshotError, match="scontrol show node --json"):
        load_snapshot([path])


def test_slurm_job_without_job_resources_shares_its_cpus_over_its_hostlist(tmp_path):
    nodes = json.loads(SLURM_24[0].read_text())
    jobs = json.loads(SLURM_24[1].read_text())
    del jobs["jobs"][0]["job_resources"]
    jobs["jobs"][0]["memory_per_node"] = {"set": True, "infinite": False, "number": 400000}
    snap = load_snapshot([write(tmp_path, "n.json", nodes), write(tmp_path, "j.json", jobs)])
    assert held(snap, "llm-finetune") == [("a100-01", 32.0, 400000, 4, 5400.0), ("a100-02", 32.0, 400000, 4, 5400.0)]
    assert held(snap, UNATTRIBUTED) == [("a100-01", 0.0, 100000, 0, None), ("a100-02", 0.0, 100000, 0, None)]


# ------------------------------------------------------------------ Kubernetes
def test_kubernetes_nodes_and_pods():
    snap = load_snapshot(K8S, taken_at=1795415335)
    assert snap.format == "kubernetes"
    nodes = by_host(snap)
    gpu1 = nodes["gpu-node-1"]
    # allocatable, not capacity: cpu "95500m", memory "1055587872Ki"
    assert (gpu1.vcores, gpu1.memory_mb, gpu1.gpus) == (95.5, 1055587872 // 1024, 8)
    assert gpu1.gpu_type == "NVIDIA-A100-SXM4-80GB" and gpu1.rack == "us-east-1a"
    assert {"nvidia.com/gpu.present=true", "kubernetes.io/hostname=gpu-node-1"} <= gpu1.labels
    assert (nodes["cpu-node-1"].gpus, nodes["cpu-node-1"].gpu_type) == (0, None)
    assert snap.unhealthy == {"gpu-node-3": "NotReady", "gpu-node-4": "cordoned"}
    assert "Kubelet stopped posting node status." in snap.unhealthy_reasons["gpu-node-3"]
    # startTime 2026-11-23T02:30:00Z (1795401000) + activeDeadlineSeconds 8 h, 1795415335 - 1795401000 s ago
    assert held(snap, "team-a/llm-pretrain") == [("gpu-node-1", 48.0, 600 * 1024, 6, 14465.0),
                                                 ("gpu-node-2", 48.0, 600 * 1024, 6, 14465.0)]
    # the init container (4 cpu) outweighs the app container (2 cpu); memory is the larger, 8Gi
    assert held(snap, "team-b/notebook-7f9c6d5b8") == [("cpu-node-1", 4.0, 8192, 0, None)]
    assert held(snap, "kube-system/nvidia-device-plugin-daemonset") == [
        ("gpu-node-1", 0.05, 64, 0, None), ("gpu-node-2", 0.05, 64, 0, None)]
    jobs = {a.job for a in snap.running}
    assert not any("eval-nightly" in j or "sweep" in j for j in jobs)      # Succeeded; Pending and unbound


def pod(name, node, containers, init=(), phase="Running", **meta):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", **meta},
            "spec": {"nodeName": node, "containers": list(containers), "initContainers": list(init)},
            "status": {"phase": phase}}


def container(requests=None, limits=None, restart=None):
    c = {"name": "c", "resources": {k: v for k, v in (("requests", requests), ("limits", limits)) if v}}
    if restart:
        c["restartPolicy"] = restart
    return c


def k8s_nodes(tmp_path, **extra):
    doc = json.loads(K8S[0].read_text())
    doc["items"][0]["spec"].update(extra)
    return write(tmp_path, "nodes.json", doc)


def test_kubernetes_pod_requests_follow_the_scheduler(tmp_path):
    pods = {"apiVersion": "v1", "kind": "List", "items": [
        pod("limits-only", "gpu-node-1", [container(limits={"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1})]),
        pod("sidecar", "gpu-node-1", [container({"cpu": "1"})],
            init=[container({"cpu": "500m"}, restart="Always"), container({"cpu": "3"})]),
        pod("bound-pending", "gpu-node-2", [container({"cpu": "250m", "memory": "100M"})], phase="Pending"),
        pod("gang-member", "gpu-node-2", [container({"nvidia.com/gpu": "2"})],
            annotations={"scheduling.k8s.io/group-name": "pg-7"}),
    ]}
    snap = load_snapshot([K8S[0], write(tmp_path, "pods.json", pods)], taken_at=0)
    assert held(snap, "ns/limits-only") == [("gpu-node-1", 2.0, 1024, 1, None)]
    # max(app 1 + sidecar 0.5, init 3 + sidecar 0.5 started before it) = 3.5
    assert held(snap, "ns/sidecar") == [("gpu-node-1", 3.5, 0, 0, None)]
    assert held(snap, "ns/bound-pending") == [("gpu-node-2", 0.25, 96, 0, None)]   # 100 MB is 95.4 MiB, rounded up
    assert held(snap, "ns/pg-7") == [("gpu-node-2", 0.0, 0, 2, None)]


def test_kubernetes_typed_lists_may_leave_out_the_items_kind(tmp_path):
    doc = json.loads(K8S[0].read_text())
    doc["kind"] = "NodeList"
    for item in doc["items"]:
        del item["kind"]
    single = json.loads(K8S[0].read_text())["items"][4]          # kubectl get node cpu-node-1 -o json
    assert len(load_snapshot([write(tmp_path, "nodes.json", doc)]).specs) == 5
    assert [s.host for s in load_snapshot([write(tmp_path, "node.json", single)]).specs] == ["cpu-node-1"]


def test_kubernetes_network_domains_come_from_topograph_labels_then_zone_and_region(tmp_path):
    doc = json.loads(K8S[0].read_text())
    doc["items"][0]["metadata"]["labels"].update({
        "network.topology.nvidia.com/spine": "sp-1", "network.topology.nvidia.com/leaf": "lf-3",
        "topology.kubernetes.io/region": "us-east-1", "network.topology.nvidia.com/bad level": "x"})
    snap = load_snapshot([write(tmp_path, "nodes.json", doc)])
    spec = by_host(snap)["gpu-node-1"]
    assert spec.domains == (("leaf", "lf-3"), ("spine", "sp-1"), ("zone", "us-east-1a"), ("region", "us-east-1"))
    shown = {node["host"]: node.get("domains") for node in to_json(snap)["nodes"]}   # `gangmaster snapshot --json`
    assert shown["gpu-node-1"] == {"leaf": "lf-3", "spine": "sp-1", "zone": "us-east-1a", "region": "us-east-1"}


def test_kubernetes_taints(tmp_path):
    path = k8s_nodes(tmp_path, taints=[{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}])
    assert load_snapshot([path]).unhealthy["gpu-node-1"] == "node.kubernetes.io/disk-pressure"
    path = k8s_nodes(tmp_path, taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"},
                                       {"key": "soft", "effect": "PreferNoSchedule"}])
    snap = load_snapshot([path])
    assert "gpu-node-1" not in snap.unhealthy
    assert any("dedicated=infer:NoSchedule (1)" in note for note in snap.notes)


@pytest.mark.parametrize("text, value", [
    ("16", 16), ("15500m", 15.5), ("64Gi", 64 * 2 ** 30), ("65536Ki", 65536 * 1024), ("1.5e3", 1500),
    ("128974848", 128974848), ("129M", 129 * 10 ** 6), ("1E", 10 ** 18), (".5", 0.5), (8, 8),
])
def test_kubernetes_quantities(text, value):
    from decimal import Decimal
    assert _quantity(Value({"q": text}, "f"), "q", Decimal(0)) == Decimal(str(value))


@pytest.mark.parametrize("text", ["-1", "12 Gi", "1Xi", "", "lots", True, [1], "1e9999"])
def test_kubernetes_bad_quantities_are_refused(tmp_path, text):
    doc = json.loads(K8S[0].read_text())
    doc["items"][1]["status"]["allocatable"]["memory"] = text
    with pytest.raises(SnapshotError) as caught:
        load_snapshot([write(tmp_path, "nodes.json", doc)])
    assert "items[1].status.allocatable.memory" in str(caught.value) or "items[1].status.allocatable" in str(caught.value)


# ------------------------------------------------------------------ YARN
def test_yarn_nodes_apps_and_containers():
    snap = load_snapshot(YARN)
    assert snap.format == "yarn"
    nodes = by_host(snap)
    host1 = nodes["gpu-host-01.example.com"]
    assert (host1.vcores, host1.memory_mb, host1.gpus, host1.rack, host1.labels) == (64.0, 368640, 8, "/rack-a",
                                                                                       {"gpu"})
    assert host1.gpu_type is None                              # YARN does not report GPU models
    assert nodes["gpu-host-05.example.com"].gpus == 8          # LOST, but totalResource still says what it has
    assert snap.unhealthy == {"gpu-host-04.example.com": "UNHEALTHY", "gpu-host-05.example.com": "LOST"}
    assert "local-dirs" in snap.unhealthy_reasons["gpu-host-04.example.com"]
    # two containers on each of two hosts and the AM's on a third, added up per host; the
    # LIFETIME timeout's remaining seconds as the latest end
    assert held(snap, "resnet50-train") == [("gpu-host-01.example.com", 24.0, 196608, 4, 14400.0),
                                            ("gpu-host-02.example.com", 24.0, 196608, 4, 14400.0),
                                            ("gpu-host-03.example.com", 1.0, 4096, 0, 14400.0)]
    # nightly-etl's containers were not dumped: the rest of gpu-host-03's usage is nobody's
    assert held(snap, UNATTRIBUTED) == [("gpu-host-03.example.com", 39.0, 98304, 0, None)]


def test_yarn_without_containers_names_the_only_running_application(tmp_path):
    apps = json.loads(YARN[1].read_text())
    apps["apps"]["app"] = apps["apps"]["app"][:1]
    snap = load_snapshot([YARN[0], write(tmp_path, "apps.json", apps)])
    assert {a.job for a in snap.running} == {"resnet50-train"}
    assert sum(a.gpus for a in snap.running) == 8


def test_yarn_without_containers_and_several_applications_is_unattributed():
    snap = load_snapshot(YARN[:2])
    assert {a.job for a in snap.running} == {UNATTRIBUTED}
    assert any("appattempts" in note for note in snap.notes)


def test_yarn_2_x_nodes_capacity_is_used_plus_available():
    snap = load_snapshot([FIX / "yarn-2.x-nodes.json"])
    nodes = by_host(snap)
    assert (nodes["h1"].vcores, nodes["h1"].memory_mb, nodes["h1"].gpus) == (8.0, 8192, 0)
    assert snap.unhealthy == {"h2": "DECOMMISSIONED"} and snap.unhealthy_reasons == {}
    assert held(snap, UNATTRIBUTED) == [("h1", 2.0, 2048, 0, None)]


def test_yarn_one_element_lists_written_as_objects(tmp_path):
    doc = json.loads((FIX / "yarn-2.x-nodes.json").read_text())
    doc["nodes"]["node"] = doc["nodes"]["node"][0]            # old Jersey JSON: a bare object
    assert [s.host for s in load_snapshot([write(tmp_path, "n.json", doc)]).specs] == ["h1"]


#: What a real Hadoop 3.4.2 RM answered (tests/fixtures/yarn/README.md): three NodeManagers on one
#: host, told apart by port (``yarn.scheduler.include-port-in-node-name``).
REAL_YARN = ROOT / "tests" / "fixtures" / "yarn"
REAL_RUNNING = [REAL_YARN / "rest-nodes-running-3.4.2.json", REAL_YARN / "rest-apps-running-3.4.2.json",
                REAL_YARN / "rest-scheduler-running-3.4.2.json"]
#: file sets -> (node: (vcores, MB, GPUs)), what each node holds)
REAL_CASES = {
    "idle cluster": ([REAL_YARN / "nodes-3.4.2.json"],
                     {f"localhost:181{n}0": (4.0, 4096, 4) for n in range(3)}, {}),
    "nodes, apps and scheduler while a job runs": (
        REAL_RUNNING, {f"localhost:181{n}0": (12.0, 40960, 4) for n in range(3)},
        {"sleepy": [("localhost:18100", 3.0, 1280, 4, None), ("localhost:18110", 1.0, 512, 2, None)]}),
    "per-GPU resources (gangmaster.io/gpu-<i>) beside yarn.io/gpu": (
        [REAL_YARN / "rest-nodes-gpu-index-3.4.2.json"], {f"localhost:181{n}0": (12.0, 40960, 4) for n in range(3)},
        {UNATTRIBUTED: [("localhost:18100", 3.0, 1280, 4, None), ("localhost:18110", 1.0, 512, 2, None)]}),
}


@pytest.mark.parametrize("files, nodes, running", REAL_CASES.values(), ids=list(REAL_CASES))
def test_yarn_3_4_2_recordings(files, nodes, running):
    snap = load_snapshot(files)
    assert snap.format == "yarn" and not snap.unhealthy
    assert {s.host: (s.vcores, s.memory_mb, s.gpus) for s in snap.specs} == nodes
    assert {job: held(snap, job) for job in {a.job for a in snap.running}} == running


def test_yarn_nodes_of_one_host_are_known_by_their_ids_others_by_their_host(tmp_path):
    doc = json.loads((REAL_YARN / "nodes-3.4.2.json").read_text())
    doc["nodes"]["node"][2]["nodeHostName"] = "other"        # a host of its own keeps its name
    assert sorted(s.host for s in load_snapshot([write(tmp_path, "n.json", doc)]).specs) == [
        "localhost:18110", "localhost:18120", "other"]


# ------------------------------------------------------------------ attribution
def test_allocations_are_cut_to_what_the_node_reports_in_use():
    specs = [NodeSpec("a", vcores=8, memory_mb=1000, gpus=2), NodeSpec("b", vcores=8, memory_mb=1000)]
    named = [RunningAllocation("j1", "a", 6, 600, 2), RunningAllocation("j2", "a", 6, 600, 2),
             RunningAllocation("j3", "ghost", 1, 1, 0)]
    running, notes = reconcile(specs, named, {"a": Usage(10, 900, 2), "b": Usage(1.5, 0, 0)})
    assert running == [RunningAllocation("j1", "a", 6.0, 600, 2), RunningAllocation("j2", "a", 2.0, 300, 0),
                       RunningAllocation(UNATTRIBUTED, "b", 1.5, 0, 0)]
    assert len(notes) == 4 and "ghost" in notes[3]
    assert notes[0] == "1 node(s) report more in use than they hold; taken as using what they hold: a"   # 10 of 8 vcores


def test_a_job_s_allocations_on_one_host_are_added_up():
    specs = [NodeSpec("a", vcores=8, memory_mb=1000, gpus=2)]
    named = [RunningAllocation("j", "a", 1.5, 100, 1, 60.0), RunningAllocation("j", "a", 2, 200, 1, 90.0),
             RunningAllocation("k", "a", 1, 100, 0, None), RunningAllocation("k", "a", 1, 100, 0, 30.0)]
    running, _ = reconcile(specs, named, None)
    assert running == [RunningAllocation("j", "a", 3.5, 300, 2, 90.0), RunningAllocation("k", "a", 2.0, 200, 0, None)]


def test_without_node_usage_allocations_are_bounded_by_capacity():
    specs = [NodeSpec("a", vcores=8, memory_mb=1000, gpus=2)]
    running, notes = reconcile(specs, [RunningAllocation("j", "a", 9, 2000, 3)], None)
    assert running == [RunningAllocation("j", "a", 8.0, 1000, 2)] and "cut" in notes[0]


# ------------------------------------------------------------------ bad input
def test_each_refusal_names_the_file_the_path_and_what_was_expected(tmp_path):
    doc = json.loads(SLURM[0].read_text())
    doc["nodes"][2]["cpus"] = "sixteen"
    path = write(tmp_path, "sinfo.json", doc)
    with pytest.raises(SnapshotError) as caught:
        load_snapshot([path])
    assert str(caught.value) == f'{path}: nodes[2].cpus: expected a number >= 0, got "sixteen"'
    assert isinstance(caught.value, ConfigError)               # every command exits 2 on it


CASES = {
    "not JSON": ("{nodes: [", "line 1: expected JSON (Expecting property name"),
    "NaN": ('{"nodes": [{"name": "n", "cpus": NaN}], "meta": {}}', "finite numbers"),
    "a list": ("[1, 2]", "(top level): expected a JSON object"),
    "an unknown shape": ('{"hello": 1}', "an object with the keys hello"),
    "no node listing": ('{"jobs": [], "meta": {}}', "a node listing among the slurm files"),
    "deep nesting": ("[" * 100000 + "]" * 100000, "nested"),
    "huge integer": ('{"nodes": [{"name": "n", "cpus": ' + "9" * 5000 + "}]}", "sensible size"),
    "negative memory": ('{"nodes": [{"name": "n", "real_memory": -5}]}', "nodes[0].real_memory: expected a number >= 0"),
    "alloc_cpus past MAX_VCORES": ('{"nodes": [{"name": "n", "alloc_cpus": 1e308}]}', "nodes[0].alloc_cpus: expected a "
                                                                                   "number <= 1,048,576 (MAX_VCORES"),
    "a YARN count past 2^53": ('{"nodes": {"node": [{"nodeHostName": "h", "usedMemoryMB": 1e300}]}}',
                               "nodes.node[0].usedMemoryMB: expected a number <= 9,007,199,254,740,992"),
    "past MAX_MEMORY_MB": ('{"nodes": [{"name": "n", "real_memory": 4294967297}]}', "MAX_MEMORY_MB"),
    "a host that is no name": ('{"nodes": [{"name": "two words"}]}', "nodes[0].name: expected a name"),
    "a duplicate host": ('{"nodes": [{"name": "n"}, {"name": "n"}]}', "nodes[1]: expected each host once; 'n' is also at"),
    "wrong type of state": ('{"nodes": [{"name": "n", "state": 5}]}', "nodes[0].state: expected a list of strings"),
    "not UTF-8": (b'{"nodes": [{"name": "\xff"}]}', "UTF-8"),
    "a YARN node without host": ('{"nodes": {"node": [{"state": "RUNNING"}]}}', "nodes.node[0].id: expected a string"),
    "a duplicate key": ('{"nodes": [{"name": "n", "cpus": 8, "cpus": 4000}]}',
                        'nodes[0].cpus: expected each key once in an object; "cpus" is given twice'),
    "a duplicate key deeper": ('{"nodes": [{"name": "n"}, {"name": "m", "x": [{"k": 1, "k": 2}]}]}',
                               'nodes[1].x[0].k: expected each key once'),
    "no nodes": ('{"nodes": [], "meta": {}}', "nodes: expected at least one node (read as slurm JSON"),
    "Slurm nodes as an object": ('{"nodes": {}, "meta": {"plugin": {"type": "openapi/v0.0.38"}, '
                                 '"Slurm": {"release": "22.05.8"}}}', "nodes: expected a list (read as slurm JSON: its meta names Slurm), got a mapping"),
    "Slurm 24.05 jobs as an object": ('{"jobs": {}, "meta": {"slurm": {"release": "24.05.1"}}}',
                                      "jobs: expected a list (read as slurm JSON"),
    "YARN nodes, meta or not": ('{"nodes": {}, "meta": {}}', "nodes.node: expected at least one node (read as "
                                                             "yarn JSON"),
    "a fractional GPU count": (json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": "1.5"}}}]}),
        'items[0].status.allocatable.nvidia.com/gpu: expected a whole number of devices'),
    "a fractional GPU request": (json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": "2"}}},
        pod("p", "n", [container({"nvidia.com/gpu": "500m"})])]}), "nvidia.com/gpu: expected a whole number"),
    "a pod request of a billion GPUs": (json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1"}}},
        pod("p", "n", [container({"nvidia.com/gpu": "1e9"})])]}), "MAX_GPUS_PER_NODE"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused(tmp_path, case):
    text, expected = CASES[case]
    path = tmp_path / "snap.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(SnapshotError) as caught:
        load_snapshot([path])
    assert str(caught.value).startswith(str(path)) and expected in str(caught.value), str(caught.value)
    assert "<object" not in str(caught.value)


def _slurm_node(change):
    return lambda docs: docs["sinfo.json"]["nodes"][0].update(change)


def _kubernetes_item_kind(kind):
    return lambda docs: docs["nodes.json"]["items"][0].update(kind=kind)


#: What a snapshot reads but cannot take as given: a change to an example's files, the note it gives.
NOTED = {
    "Slurm cpus null": (SLURM, _slurm_node({"cpus": None}),
                        "1 node(s) report no cpus (null or not set), taken as 0: nothing that asks for vcores fits "
                        "them: cpu1"),
    "Slurm real_memory not set": (SLURM, _slurm_node({"real_memory": {"set": False, "infinite": False, "number": 0}}),
                                  "1 node(s) report no real_memory (null or not set), taken as 0"),
    "Slurm usage past capacity": (SLURM, _slurm_node({"alloc_cpus": 500, "alloc_memory": 10 ** 9}),
                                  "1 node(s) report more in use than they hold; taken as using what they hold: cpu1"),
    "a Pod among the nodes": (K8S, _kubernetes_item_kind("Pod"),
                              "1 item(s) of kind Pod among the nodes are bound to no node (no spec.nodeName), hold "
                              "nothing and were left out: "),
}


@pytest.mark.parametrize("case", sorted(NOTED))
def test_what_is_read_but_not_taken_as_given_is_noted(tmp_path, case):
    files, change, note = NOTED[case]
    docs = {path.name: json.loads(path.read_text()) for path in files}
    assert not any(note in n for n in load_snapshot(files, taken_at=SLURM_TAKEN_AT).notes)
    change(docs)
    snap = load_snapshot([write(tmp_path, name, doc) for name, doc in docs.items()], taken_at=SLURM_TAKEN_AT)
    assert any(note in n for n in snap.notes), snap.notes


def test_files_of_two_engines_are_refused():
    with pytest.raises(SnapshotError, match="files of one engine only; this one is kubernetes JSON"):
        load_snapshot([SLURM[0], K8S[0]])


def test_the_same_host_in_two_node_listings_is_refused(tmp_path):
    with pytest.raises(SnapshotError, match="also at .*sinfo.json: nodes\\[0\\]"):
        load_snapshot([SLURM[0], write(tmp_path, "again.json", json.loads(SLURM[0].read_text()))])


def test_size_and_count_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshots, "MAX_SNAPSHOT_BYTES", 10_000)
    with pytest.raises(SnapshotError, match="MAX_SNAPSHOT_BYTES"):
        load_snapshot(SLURM)                   # 5.8 KB + 22.8 KB
    monkeypatch.setattr(snapshots, "MAX_SNAPSHOT_FILES", 1)
    with pytest.raises(SnapshotError, match="MAX_SNAPSHOT_FILES"):
        load_snapshot(SLURM)
    with pytest.raises(SnapshotError, match="at least one snapshot file"):
        load_snapshot([])


def test_special_files_are_refused_before_reading(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SnapshotError, match="a regular file, not a FIFO"):
        load_snapshot([fifo])
    with pytest.raises(SnapshotError, match="an existing file"):
        load_snapshot([tmp_path / "missing.json"])


def test_time_falls_back_to_the_newest_file(tmp_path):
    nodes, jobs = (write(tmp_path, p.name, json.loads(p.read_text())) for p in SLURM)
    os.utime(nodes, (1795415000, 1795415000))
    os.utime(jobs, (SLURM_TAKEN_AT, SLURM_TAKEN_AT))
    snap = load_snapshot([nodes, jobs])
    assert snap.taken_at == SLURM_TAKEN_AT and str(jobs) in snap.taken_at_from
    assert held(snap, "trainer")[0][-1] == 7071.0
    os.utime(jobs, (1795422406 + 60, 1795422406 + 60))          # past the job's end_time: 0, not negative
    assert held(load_snapshot([nodes, jobs]), "trainer")[0][-1] == 0.0


def test_jobs_sharing_a_name_are_told_apart_by_their_id(tmp_path):
    jobs = json.loads(SLURM_24[1].read_text())
    second = json.loads(json.dumps(jobs["jobs"][0]))
    second.update(job_id=48299, nodes="a100-02")
    second["job_resources"]["nodes"]["allocation"] = second["job_resources"]["nodes"]["allocation"][1:]
    jobs["jobs"][0]["job_resources"]["nodes"]["allocation"] = jobs["jobs"][0]["job_resources"]["nodes"]["allocation"][:1]
    jobs["jobs"].append(second)
    snap = load_snapshot([SLURM_24[0], write(tmp_path, "jobs.json", jobs)])
    # each with its own node's CPUs as counted (not scaled to the job's total of 64)
    assert {(a.job, a.host, a.vcores) for a in snap.running} == {("llm-finetune (48211)", "a100-01", 32.0),
                                                                ("llm-finetune (48299)", "a100-02", 32.0)}
    apps = json.loads(YARN[1].read_text())
    apps["apps"]["app"][1]["name"] = apps["apps"]["app"][0]["name"]
    snap = load_snapshot([YARN[0], write(tmp_path, "apps.json", apps), YARN[2]])
    assert {a.job for a in snap.running} == {"resnet50-train (application_1795400000000_0007)", UNATTRIBUTED}
