"""The local YARN cluster's configuration, requirements and status, without starting Java
(tests/e2e/test_yarn_cluster.py starts the real one)."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from gangmaster.conf import conf_path
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.cli import main
from gangmaster.tools.yarn import local_cluster as lc

# the embedded cluster's three nodes, at the sizes the figures below were worked out for
SPECS = [replace(s, memory_mb=4096, vcores=4.0) for s in load_cluster_specs(conf_path("clusters/yarn-local.yaml"))]


def test_default_cluster_is_three_nodes():
    assert [s.host for s in SPECS] == ["yarn-000", "yarn-001", "yarn-002"]


def test_every_address_is_loopback_and_distinct(tmp_path):
    ports = lc.Ports(20030, 20100)
    confs = [lc.yarn_site(SPECS, tmp_path, ports)] + [lc.yarn_site(SPECS, tmp_path, ports, i) for i in range(3)]
    addresses = {k: v for conf in confs for k, v in conf.items() if k.endswith(".address")}
    assert all(str(v).startswith("127.0.0.1:") for v in addresses.values())
    nm_addresses = [c[key] for c in confs[1:] for key in ("yarn.nodemanager.address",
                                                          "yarn.nodemanager.localizer.address",
                                                          "yarn.nodemanager.webapp.address")]
    assert len(set(nm_addresses)) == 9 and "127.0.0.1:20100" in nm_addresses
    assert confs[0]["yarn.resourcemanager.webapp.address"] == "127.0.0.1:20038"


def test_node_resources_and_scheduler(tmp_path):
    specs = SPECS[:1] + [lc.NodeSpec(host="big", memory_mb=8192, vcores=6.4, gpus=8)]
    rm = lc.yarn_site(specs, tmp_path, lc.Ports())
    nm = lc.yarn_site(specs, tmp_path, lc.Ports(), node=1)
    assert rm["yarn.scheduler.include-port-in-node-name"] == "true"
    # GPUs counted, and each GPU by its index up to the largest node's 8
    assert rm["yarn.resource-types"] == "yarn.io/gpu," + ",".join(f"gangmaster.io/gpu-{i}" for i in range(8))
    small = lc.yarn_site(specs, tmp_path, lc.Ports(), node=0)
    assert [k for k in small if "gangmaster.io/gpu-" in k] == [
        f"yarn.nodemanager.resource-type.gangmaster.io/gpu-{i}" for i in range(4)]   # its own 4 GPUs
    assert all(nm[f"yarn.nodemanager.resource-type.gangmaster.io/gpu-{i}"] == 1 for i in range(8))
    assert (rm["yarn.scheduler.maximum-allocation-mb"], rm["yarn.scheduler.maximum-allocation-vcores"]) == (8192, 6)
    assert (nm["yarn.nodemanager.resource.memory-mb"], nm["yarn.nodemanager.resource.cpu-vcores"],
            nm["yarn.nodemanager.resource-type.yarn.io/gpu"]) == (8192, 6, 8)
    assert nm["yarn.nodemanager.local-dirs"] != lc.yarn_site(specs, tmp_path, lc.Ports(), 0)["yarn.nodemanager.local-dirs"]
    assert "resource-plugins" not in " ".join(nm)        # no GPU plugin: nothing probes nvidia-smi
    assert lc.capacity_scheduler()["yarn.scheduler.capacity.resource-calculator"].endswith("DominantResourceCalculator")


def test_xml_is_hadoop_configuration():
    root = ET.fromstring(lc._xml({"a.b": "x<y", "n": 3}))
    assert root.tag == "configuration"
    assert [(p.findtext("name"), p.findtext("value")) for p in root] == [("a.b", "x<y"), ("n", "3")]


def test_missing_java_or_mvn(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert lc.missing_requirements().startswith("java and mvn not found")
    with pytest.raises(lc.YarnUnavailable, match="java and mvn not found"):
        lc.ensure_jars("3.4.2", tmp_path / "cache")


def test_cli_without_java_is_one_line_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    code = main(["yarn", "local-cluster", "start", "--work-dir", str(tmp_path / "wd"),
                 "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("gangmaster yarn local-cluster: cannot start: java and mvn not found")


@pytest.mark.parametrize("output,expected", [
    ("[ERROR] Failed to execute goal ... Could not transfer artifact org.apache.hadoop:hadoop-common:pom:3.4.2 "
     "from/to central (https://repo.maven.apache.org/maven2): Unknown host repo.maven.apache.org",
     "Maven Central cannot be reached"),
    ("[ERROR] Failed to execute goal on project x: Could not resolve dependencies: Could not find artifact "
     "org.apache.hadoop:hadoop-common:jar:9.9.9 in central", "Hadoop 9.9.9 could not be resolved"),
    ("[ERROR] Non-parseable POM", "mvn failed resolving Hadoop 9.9.9: Non-parseable POM"),
])
def test_maven_failures_are_one_line(output, expected):
    message = lc._maven_problem(output, "9.9.9")
    assert message.startswith(expected) and "\n" not in message


def test_resolved_jars_are_kept_until_the_pom_changes(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(lc, "missing_requirements", lambda: "")

    def fake_mvn(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")
    monkeypatch.setattr(lc.subprocess, "run", fake_mvn)
    lib = lc.ensure_jars("3.4.2", tmp_path)
    assert lc.ensure_jars("3.4.2", tmp_path) == lib == tmp_path / "lib" and len(calls) == 1
    assert "-Dhadoop.version=3.4.2" in calls[0] and f"-DoutputDirectory={lib}" in calls[0]
    (lib / ".resolved").write_text("3.4.2 another-pom\n")
    lc.ensure_jars("3.4.2", tmp_path)
    assert len(calls) == 2


def test_start_refuses_a_busy_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(lc.ClusterStartError, match=f"{port}.*--rm-port"):
            lc.LocalCluster(tmp_path).start(SPECS, lc.Ports(port, 20100), lib=tmp_path)


def test_status_says_which_daemon_is_dead(tmp_path, capsys):
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"{tmp_path}/conf/nm:lib"])
    try:
        deadline = time.monotonic() + 10
        while b"conf/nm:lib" not in Path(f"/proc/{live.pid}/cmdline").read_bytes():   # until it has exec'd
            assert time.monotonic() < deadline
            time.sleep(0.01)
        state = {"version": "3.4.2", "ports": {"rm": 20030, "first_nm": 20100}, "nodes": {}, "daemons": {
            "resourcemanager": {"pid": done.pid, "conf": f"{tmp_path}/conf/rm", "log": "rm.log", "main": "x"},
            "nodemanager n1": {"pid": live.pid, "conf": f"{tmp_path}/conf/nm", "log": "n1.log", "main": "x"}}}
        (tmp_path / lc.STATE_FILE).write_text(json.dumps(state))
        status = lc.LocalCluster(tmp_path).status()
        assert status["dead"] == ["resourcemanager"]
        assert main(["yarn", "local-cluster", "status", "--work-dir", str(tmp_path)]) == 1
        out = capsys.readouterr().out
        assert "DEAD: resourcemanager" in out and "nodemanager n1" in out
    finally:
        live.kill()
        live.wait()


def test_status_of_an_empty_folder(tmp_path, capsys):
    assert main(["yarn", "local-cluster", "status", "--work-dir", str(tmp_path)]) == 1
    assert "no local YARN cluster" in capsys.readouterr().out


def _queues(*queues):
    from gangmaster.tools.rmsim.queues import Queue
    return [Queue(name, **limits) for name, limits in queues]


@pytest.mark.parametrize("queues,expected", [
    # one machine's worth of three (memory, vcores and GPUs all 1/3), GPUs only 4 of 12: a spare queue takes the rest
    (_queues(("research", dict(max_mem=4096, max_mvc=4000, max_gpus=4)), ("batch", dict(max_gpus=4))),
     {"research": (33.333, 33.333), "batch": (33.333, 33.333), lc.SPARE_QUEUE: (33.334, 33.333)}),
    # limits that add up to more than the cluster: guarantees scaled to 100, maxima kept
    (_queues(("a", dict(max_mem=8192)), ("b", dict(max_mem=8192))), {"a": (50.0, 66.667), "b": (50.0, 66.667)}),
    # no limit at all: the whole cluster; the dominant share of a mixed limit
    (_queues(("all", {}),), {"all": (100.0, 100.0)}),
    (_queues(("x", dict(max_mem=12288, max_gpus=6)), ("y", dict(max_mvc=6000))), {"x": (66.667, 100.0),
                                                                                "y": (33.333, 50.0)}),
])
def test_queue_capacities(queues, expected):
    capacities = lc.queue_capacities(queues, SPECS)
    assert capacities == expected
    assert sum(c for c, _ in capacities.values()) == pytest.approx(100, abs=1e-9)


def test_capacity_scheduler_lists_the_queues():
    props = lc.capacity_scheduler(_queues(("a", dict(max_gpus=6)), ("b", dict(max_gpus=6))), SPECS)
    assert props["yarn.scheduler.capacity.root.queues"] == "a,b"
    assert props["yarn.scheduler.capacity.root.a.capacity"] == "50"
    assert lc.capacity_scheduler()["yarn.scheduler.capacity.root.queues"] == "default"


def test_a_nodemanager_that_never_registers_is_named_with_its_log(tmp_path, monkeypatch):
    cluster = lc.LocalCluster(tmp_path)
    (tmp_path / "n2.log").write_text("starting\njava.net.BindException: Address already in use\n")
    cluster._save({"ports": {"rm": 20030, "first_nm": 20100}, "nodes": {
        "yarn-000": {"rpc_port": 20100}, "yarn-001": {"rpc_port": 20110}, "yarn-002": {"rpc_port": 20120}},
        "daemons": {"nodemanager yarn-001": {"pid": 1, "conf": "c", "log": str(tmp_path / "n2.log"), "main": "x"}}})
    monkeypatch.setattr(cluster, "node_states", lambda: {20100: "RUNNING", 20120: "RUNNING"})
    lines = []
    with pytest.raises(lc.ClusterStartError) as info:
        cluster._wait_nodes(SPECS, timeout_s=0.2, started=time.monotonic(), progress=lines.append)
    message = str(info.value)
    assert message.startswith("nodemanager yarn-001 (127.0.0.1:20110) never came RUNNING within 0 s "
                              "(2/3 NodeManager(s) RUNNING; waiting for yarn-001)")
    assert message.endswith("  java.net.BindException: Address already in use")
    assert lines == ["2/3 NodeManager(s) RUNNING (0 s)"]
