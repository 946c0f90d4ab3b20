"""A real Apache Hadoop YARN cluster (one ResourceManager, three NodeManagers, started by
``gangmaster yarn local-cluster``) and a Python AM that speaks YARN's own protocols to it.

One cluster for the whole test session, shared with the other YARN tests (``yarn_cluster`` in
conftest.py; yarn_cluster.py says how). Skips, saying why, where Java, Maven or Maven Central
is missing."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from gangmaster.conf import conf_path
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.yarn.local_cluster import LocalCluster
from gangmaster.tools.yarn.rest import FINAL_STATES, AMSpec, RestError, YarnRest

from yarn_cluster import YARN

pytestmark = YARN


def _wait_final(rest: YarnRest, app_id: str, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app = rest.application(app_id)
        if app.get("state") in FINAL_STATES:
            return app
        time.sleep(0.5)
    raise AssertionError(f"{app_id} did not end within {timeout_s:.0f} s: {rest.application(app_id)}")


def _am_output(cluster: LocalCluster, app_id: str) -> str:
    return "\n".join(p.read_text() for p in sorted(cluster.work_dir.glob(f"nm/*/logs/{app_id}/*_000001/std*")))


def _submit_am(cluster: LocalCluster, rest: YarnRest, *extra: str) -> tuple[dict, str]:
    scheduler = cluster.status()["rm_scheduler"]
    command = (f"{sys.executable} -m gangmaster.tools.yarn.am_entry --rm-scheduler {scheduler} {' '.join(extra)} "
               f"1><LOG_DIR>/stdout 2><LOG_DIR>/stderr")
    app_id = rest.submit(AMSpec("gangmaster-handshake", [command], memory_mb=256, vcores=1))
    app = _wait_final(rest, app_id)
    return app, _am_output(cluster, app_id)


def _listening(pids: set[int]) -> list[str]:
    """The local addresses the processes ``pids`` listen on (TCP), from ``ss -ltnp``."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines()
            if any(f"pid={pid}," in line for pid in pids)]


def test_a_python_am_on_real_yarn(yarn_cluster):
    cluster = yarn_cluster
    rest = YarnRest(cluster.rm_web)

    # the cluster: three NodeManagers RUNNING, named host:port, each with its 4 GPUs as yarn.io/gpu
    nodes = rest.nodes()
    assert sorted(n["state"] for n in nodes) == ["RUNNING"] * 3
    assert sorted(int(n["id"].rsplit(":", 1)[1]) for n in nodes) == sorted(
        node["rpc_port"] for node in cluster.state()["nodes"].values())
    for node in nodes:
        gpus = [r["value"] for r in node["totalResource"]["resourceInformations"]["resourceInformation"]
                if r["name"] == "yarn.io/gpu"]
        spec = next(s for s in load_cluster_specs(conf_path("clusters/yarn-local.yaml")))
        assert gpus == [spec.gpus] and node["totalResource"]["memory"] == spec.memory_mb, node["id"]

    # everything listens on loopback only (the NodeManager's default is 0.0.0.0:0)
    if shutil.which("ss"):
        addresses = _listening(set(cluster.running().values()))
        assert addresses and all(a.startswith("127.0.0.1:") for a in addresses), addresses

    # the handshake: SASL TOKEN/DIGEST-MD5 with the AMRMToken, register, allocate, finish
    app, output = _submit_am(cluster, rest)
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), (app.get("diagnostics"), output)
    assert "am: registered: queue root.default" in output

    # one container on exactly one NodeManager, started there with the NMToken
    target = sorted(n["id"] for n in nodes)[1]
    app, output = _submit_am(cluster, rest, "--probe-node", target)
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), (app.get("diagnostics"), output)
    assert f"on {target} (asked {target})" in output and "completed with exit status 0" in output, output

    # the RM's refusals come back typed, with its message
    with pytest.raises(RestError) as info:
        rest.submit(AMSpec("too-big", ["true"], memory_mb=1 << 20))
    assert info.value.exception == "BadRequestException" and "more memory than configured max" in info.value.message

    status = cluster.status()
    assert status["dead"] == [] and len(status["daemons"]) == 4
    print(f"yarn local cluster started in {cluster.state()['started_in_s']:.1f} s")
