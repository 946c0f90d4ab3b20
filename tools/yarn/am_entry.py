"""The smallest ApplicationMaster: the handshake with a real ResourceManager, in Python.

Run in the AM container YARN starts (``python -m gangmaster.tools.yarn.am_entry
--rm-scheduler HOST:PORT``): it reads the AMRMToken from ``HADOOP_TOKEN_FILE_LOCATION``,
connects to the RM's scheduler port with SASL TOKEN/DIGEST-MD5, registers, heartbeats
once with an empty allocate, and unregisters with SUCCEEDED; the application then ends
FINISHED/SUCCEEDED. With ``--probe-node HOST:PORT`` it also asks for one container on
exactly that NodeManager (``relax_locality`` false everywhere but the node), and starts a
``true`` command in it over ContainerManagementProtocol with the NMToken from the allocate.

YARN does not tell an AM where the scheduler listens (a Java AM reads yarn-site.xml):
the submitter passes it. Each step prints one line (the container's stdout log), so a
failed handshake says how far it got.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .credentials import AMRM_TOKEN_KIND, Token, read_credentials
from .ipc import AM_PROTOCOL, NM_PROTOCOL, IpcConnection, IpcError
from .proto import yarn_pb2 as yarn

GPU = "yarn.io/gpu"


def _say(text: str) -> None:
    print(f"am: {text}", flush=True)


def amrm_token(path: str | None = None) -> Token:
    path = path or os.environ.get("HADOOP_TOKEN_FILE_LOCATION")
    if not path:
        raise IpcError("HADOOP_TOKEN_FILE_LOCATION is not set: not in a YARN container?")
    token = read_credentials(path).token_of_kind(AMRM_TOKEN_KIND)
    if token is None:
        raise IpcError(f"{path}: no {AMRM_TOKEN_KIND} token")
    return token


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def container_ask(node: str, memory_mb: int, vcores: int, gpus: int, request_id: int,
                  rack: str = "/default-rack") -> list[yarn.ResourceRequestProto]:
    """The three ResourceRequests of "one container on exactly ``node``" (as Hadoop's
    AMRMClient builds them): the node (relaxed), its rack and ``*`` (not relaxed)."""
    capability = yarn.ResourceProto(memory=memory_mb, virtual_cores=vcores)
    if gpus:
        capability.resource_value_map.add(key=GPU, value=gpus)
    return [yarn.ResourceRequestProto(priority=yarn.PriorityProto(priority=1), resource_name=name,
                                      capability=capability, num_containers=1, relax_locality=relax,
                                      allocation_request_id=request_id)
            for name, relax in ((node, True), (rack, False), ("*", False))]


def probe_container(rm: IpcConnection, node: str, response_id: int, timeout_s: float = 60.0) -> int:
    """Ask for one container on ``node``, start ``true`` in it, wait until it completes; the next response id."""
    ask = container_ask(node, 128, 1, 1, request_id=7)
    deadline = time.monotonic() + timeout_s
    granted, tokens = None, {}
    while granted is None:
        response = rm.call("allocate", yarn.AllocateRequestProto(ask=ask, response_id=response_id, progress=0.5),
                           yarn.AllocateResponseProto)
        response_id = response.response_id
        ask = []          # the RM keeps the ask table; asking again would ask for more
        for t in response.nm_tokens:
            tokens[f"{t.nodeId.host}:{t.nodeId.port}"] = Token.from_proto(t.token)
        if response.allocated_containers:
            granted = response.allocated_containers[0]
        elif time.monotonic() > deadline:
            raise IpcError(f"no container on {node} within {timeout_s:.0f} s")
        else:
            time.sleep(0.5)
    where = f"{granted.nodeId.host}:{granted.nodeId.port}"
    _say(f"allocated container {granted.id.id} on {where} (asked {node}), allocation_request_id "
         f"{granted.allocation_request_id}, gpus "
         f"{[r.value for r in granted.resource.resource_value_map if r.key == GPU]}")
    if where != node:
        raise IpcError(f"the container landed on {where}, not on {node}")
    nm_token = tokens.get(where)
    if nm_token is None:
        raise IpcError(f"no NMToken for {where} in the allocate responses")
    launch = yarn.ContainerLaunchContextProto(command=["true"], environment=[
        yarn.StringStringMapProto(key="CUDA_VISIBLE_DEVICES", value="0")])
    with IpcConnection(granted.nodeId.host, granted.nodeId.port, nm_token, NM_PROTOCOL) as nm:
        started = nm.call("startContainers", yarn.StartContainersRequestProto(start_container_request=[
            yarn.StartContainerRequestProto(container_launch_context=launch, container_token=granted.container_token)]),
            yarn.StartContainersResponseProto)
    if started.failed_requests:
        failure = started.failed_requests[0].exception
        raise IpcError(f"startContainers refused: {failure.class_name}: {failure.message}")
    _say(f"started container {granted.id.id} on {where}")
    while time.monotonic() < deadline:
        response = rm.call("allocate", yarn.AllocateRequestProto(response_id=response_id, progress=0.9),
                           yarn.AllocateResponseProto)
        response_id = response.response_id
        for status in response.completed_container_statuses:
            _say(f"container {status.container_id.id} completed with exit status {status.exit_status}")
            return response_id
        time.sleep(0.5)
    raise IpcError(f"container {granted.id.id} did not complete within {timeout_s:.0f} s")


def run(scheduler: str, probe_node: str | None = None) -> int:
    token = amrm_token()
    _say(f"AMRMToken for {token.service or '(no service)'}; connecting to {scheduler}")
    host, port = _split(scheduler)
    with IpcConnection(host, port, token, AM_PROTOCOL) as rm:
        _say("SASL done")
        registered = rm.call("registerApplicationMaster",
                             yarn.RegisterApplicationMasterRequestProto(host="127.0.0.1", rpc_port=-1, tracking_url=""),
                             yarn.RegisterApplicationMasterResponseProto)
        _say(f"registered: queue {registered.queue}, maximum capability {registered.maximumCapability.memory} MB")
        response = rm.call("allocate", yarn.AllocateRequestProto(response_id=0, progress=0.1),
                           yarn.AllocateResponseProto)
        _say(f"allocate: response_id {response.response_id}, {response.num_cluster_nodes} node(s)")
        if probe_node:
            probe_container(rm, probe_node, response.response_id)
        finished = rm.call("finishApplicationMaster",
                           yarn.FinishApplicationMasterRequestProto(
                               final_application_status=yarn.APP_SUCCEEDED, diagnostics="gangmaster handshake"),
                           yarn.FinishApplicationMasterResponseProto)
        _say(f"finished: unregistered={finished.isUnregistered}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gangmaster.tools.yarn.am_entry", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rm-scheduler", required=True, help="the RM's scheduler address, HOST:PORT")
    parser.add_argument("--probe-node", help="also start one container on exactly this NodeManager (HOST:PORT)")
    args = parser.parse_args(argv)
    try:
        return run(args.rm_scheduler, args.probe_node)
    except (IpcError, OSError, ValueError) as exc:
        _say(f"failed: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
