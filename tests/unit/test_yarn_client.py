"""YarnRMClient without Java: what it sends YARN for the AM's asks, cancels and releases, what it
refuses itself, how YARN's answers (grants, exit statuses, lost nodes) become the AM's, the
launch environment it gives a container, and YARN's ids. The RM's REST answers are the
recorded ones of a real 3.4.2 RM (tests/fixtures/yarn/); the scheduler's answers are built
here. tests/e2e/test_yarn_run.py runs the same client against a real RM and NodeManagers."""
from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path

import pytest

from gangmaster.am.barrier.task_context import BarrierTaskContext
from gangmaster.am.core.gang_dispatch import by_deadline
from gangmaster.protocol.rm_protocol import (AllocateRequest, ContainerState, ExitStatus, LaunchContext, NodeState,
                                       ResourceRequest, WrongState)
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.tools.yarn import ids
from gangmaster.tools.yarn.client import (PREEMPTION_WAIT_KEY, YarnRMClient, exit_status, launch_env, report_of,
                                          shell_value)
from gangmaster.tools.yarn.rest import RestError
from gangmaster.tools.yarn.proto import yarn_pb2 as yarn
from gangmaster.tools.yarn.target import YarnTarget

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "yarn"
NODES = json.loads((FIXTURES / "nodes-3.4.2.json").read_text())["nodes"]["node"]
APP = "application_1796174400000_0001"
SPECS = {f"localhost:{18100 + 10 * i}": NodeSpec(f"yarn-00{i}", "rack-a", frozenset({"nvlink"}), "T4", None, 4096, 4.0,
                                                 4, PortRanges.parse("20000-20009")) for i in range(3)}


class FakeRest:
    def __init__(self, nodes=None, conf=None):
        self.node_list = copy.deepcopy(nodes or NODES)
        self.conf_values = conf or {}

    def conf(self, key):
        if key not in self.conf_values:
            raise RestError(f"conf {key}", 404, "", "no such key")
        return self.conf_values[key]

    def nodes(self):
        return copy.deepcopy(self.node_list)


class FakeScheduler:
    """ApplicationMasterProtocol as the client calls it: records each request, answers in turn."""

    def __init__(self, *answers: yarn.AllocateResponseProto):
        self.answers = list(answers)
        self.calls: list[tuple[str, object]] = []

    def __call__(self, method, request, response_type):
        self.calls.append((method, request))
        if method == "registerApplicationMaster":
            return yarn.RegisterApplicationMasterResponseProto(
                queue="root.default", maximumCapability=yarn.ResourceProto(memory=4096, virtual_cores=4))
        answer = self.answers.pop(0) if self.answers else yarn.AllocateResponseProto()
        answer.response_id = len(self.calls)
        return answer


def _client(*answers, nodes=None, conf=None, state_dir=None) -> tuple[YarnRMClient, FakeScheduler]:
    client = YarnRMClient(YarnTarget("http://rm:8088", "rm:8030", dict(SPECS)), rest=FakeRest(nodes, conf),
                          clock=lambda: 100.0, state_dir=state_dir)
    client.app_id, client.attempt = APP, 1
    scheduler = FakeScheduler(*answers)
    client._rm_call = scheduler
    client.register(APP)
    return client, scheduler


def _ask(request_id: int, host: str = "yarn-001", **resource) -> ResourceRequest:
    r = {"memory_mb": 512, "vcores": 1.5, "gpus": 2, "gpu_mask": 0b0110, **resource}
    return ResourceRequest(request_id, ResourceDescriptor(**r), host=host, relax_locality=False)


def _container(number: int, node: str, request_id: int, gpus: int = 2) -> yarn.ContainerProto:
    host, port = node.split(":")
    resource = yarn.ResourceProto(memory=512, virtual_cores=2)
    resource.resource_value_map.add(key="yarn.io/gpu", value=gpus)
    return yarn.ContainerProto(id=ids.container_id_proto(f"container_1796174400000_0001_01_{number:06d}"),
                               nodeId=yarn.NodeIdProto(host=host, port=int(port)), resource=resource,
                               allocation_request_id=request_id)


def _sent(scheduler: FakeScheduler) -> yarn.AllocateRequestProto:
    method, request = scheduler.calls[-1]
    assert method == "allocate"
    return request


def test_an_ask_on_a_host_is_yarns_three_requests_and_a_cancel_sends_them_at_zero():
    client, scheduler = _client()
    client.allocate(AllocateRequest(APP, 1, asks=(_ask(7),)))
    asked = [(r.resource_name, r.relax_locality, r.num_containers, r.allocation_request_id,
              r.capability.memory, r.capability.virtual_cores, [v.value for v in r.capability.resource_value_map])
             for r in _sent(scheduler).ask]
    # the node (relaxed), its YARN rack and * (not relaxed); vcores rounded up; GPUs as yarn.io/gpu
    assert asked == [("localhost:18110", True, 1, 7, 512, 2, [2]), ("/default-rack", False, 1, 7, 512, 2, [2]),
                     ("*", False, 1, 7, 512, 2, [2])]
    response = client.allocate(AllocateRequest(APP, 1))
    assert [(p.request_id, p.remaining) for p in response.pending] == [(7, 1)]
    assert "not granted by YARN" in str(response.pending[0].reason) and "yarn-001 has 4096 MB" in str(response.pending[0].reason)
    client.allocate(AllocateRequest(APP, 1, cancel=(7,)))
    assert [(r.resource_name, r.num_containers) for r in _sent(scheduler).ask] == [
        ("localhost:18110", 0), ("/default-rack", 0), ("*", 0)]
    assert client.allocate(AllocateRequest(APP, 1)).pending == ()


@pytest.mark.parametrize("ask,reason", [
    (_ask(1, host="nowhere"), "unknown host 'nowhere'"),
    (_ask(1, memory_mb=8192), "asks 8192 MB memory, node yarn-001 has 4096"),
    (_ask(1, gpus=5, gpu_mask=0b11111), "asks 5 GPUs, node yarn-001 has 4"),
    (_ask(1, vcores=6.0), "asks 6 vcores, node yarn-001 has 4"),
    (_ask(1, gpus=0, gpu_mask=0, gpu_milli=500), "YARN counts whole GPUs"),
    (_ask(1, ports=1, port_ranges=PortRanges.parse("30000")), "ports 30000 outside yarn-001's task ports"),
    (ResourceRequest(1, ResourceDescriptor(256, 1.0)), "no host"),
])
def test_what_yarn_would_leave_pending_forever_is_refused_with_the_diagnosis(ask, reason):
    client, scheduler = _client()
    response = client.allocate(AllocateRequest(APP, 1, asks=(ask,)))
    [rejection] = response.rejected
    assert rejection.request_id == 1 and reason in str(rejection.reason), rejection.reason
    assert list(_sent(scheduler).ask) == [] and response.pending == ()   # nothing asked of YARN


def test_a_grant_carries_the_ask_and_the_gpus_the_am_chose_and_lowers_the_node_in_the_next_update():
    client, _ = _client(yarn.AllocateResponseProto(), yarn.AllocateResponseProto(
        allocated_containers=[_container(2, "localhost:18110", 7)]))
    first = client.allocate(AllocateRequest(APP, 1, asks=(_ask(7),)))
    assert {n.host for n in first.node_updates} == {"yarn-000", "yarn-001", "yarn-002"}   # first heartbeat: all
    response = client.allocate(AllocateRequest(APP, 1))
    [c] = response.allocated
    assert (c.container_id, c.host, c.request_id, c.resource.gpu_mask) == (
        "container_1796174400000_0001_01_000002", "yarn-001", 7, 0b0110)
    assert response.pending == ()
    [update] = response.node_updates   # our container's GPUs are out of the node's free mask
    assert update.host == "yarn-001" and update.free.gpu_mask == 0b1001 and update.labels == {"nvlink"}


def test_a_container_granted_elsewhere_than_asked_is_given_back_and_the_ask_stands():
    client, scheduler = _client(yarn.AllocateResponseProto(), yarn.AllocateResponseProto(
        allocated_containers=[_container(3, "localhost:18120", 7)]))
    client.allocate(AllocateRequest(APP, 1, asks=(_ask(7),)))
    response = client.allocate(AllocateRequest(APP, 1))
    assert response.allocated == () and [p.request_id for p in response.pending] == [7]
    assert [ids.container_id_text(c) for c in _sent(scheduler).release] == ["container_1796174400000_0001_01_000003"]


def _status(number: int, code: int, diagnostics: str = "") -> yarn.ContainerStatusProto:
    return yarn.ContainerStatusProto(container_id=ids.container_id_proto(
        f"container_1796174400000_0001_01_{number:06d}"), state=yarn.C_COMPLETE, exit_status=code,
        diagnostics=diagnostics)


@pytest.mark.parametrize("code,diagnostics,node_lost,expected", [
    (0, "", False, (ContainerState.COMPLETED, 0)),
    (137, "Exception from container-launch", False, (ContainerState.FAILED, 137)),
    (1, "", False, (ContainerState.FAILED, 1)),
    (-100, "Container released by application", False, (ContainerState.KILLED, ExitStatus.ABORTED)),
    (-100, "Container released on a *lost* node", False, (ContainerState.FAILED, ExitStatus.NODE_LOST)),
    (-100, "", True, (ContainerState.FAILED, ExitStatus.NODE_LOST)),
    (-102, "preempted", False, (ContainerState.KILLED, ExitStatus.PREEMPTED)),
    (-105, "Container killed by the ApplicationMaster.", False, (ContainerState.KILLED, ExitStatus.KILLED_BY_APPMASTER)),
    (-106, "", False, (ContainerState.KILLED, ExitStatus.KILLED_BY_RESOURCEMANAGER)),
    (-107, "", False, (ContainerState.KILLED, ExitStatus.KILLED_AFTER_APP_COMPLETION)),
    (-104, "pmem", False, (ContainerState.FAILED, -104)),
])
def test_yarn_exit_statuses_map_to_ours(code, diagnostics, node_lost, expected):
    assert exit_status(_status(2, code, diagnostics), node_lost) == expected


def _preempt(strict: tuple[int, ...] = (), contract: tuple[int, ...] = ()) -> yarn.AllocateResponseProto:
    def entries(numbers):
        return [yarn.PreemptionContainerProto(id=ids.container_id_proto(f"container_1796174400000_0001_01_{n:06d}"))
                for n in numbers]
    return yarn.AllocateResponseProto(preempt=yarn.PreemptionMessageProto(
        strictContract=yarn.StrictPreemptionContractProto(container=entries(strict)),
        contract=yarn.PreemptionContractProto(container=entries(contract))))


def _cid(number: int) -> str:
    return f"container_1796174400000_0001_01_{number:06d}"


@pytest.mark.parametrize("answers,conf,expected", [
    # the strict contract's containers, then the contract's; deadline: the client's clock (100) + YARN's grace
    ([_preempt(strict=(2, 3), contract=(4,))], {PREEMPTION_WAIT_KEY: "15000"}, [((_cid(2), _cid(3), _cid(4)), 115.0)]),
    # YARN's grace cannot be read: no deadline known
    ([_preempt(strict=(2,))], {}, [((_cid(2),), math.inf)]),
    # YARN repeats its notice each heartbeat: the AM is told of each container once
    ([_preempt(strict=(2,)), _preempt(strict=(2, 3)), _preempt(strict=(2, 3))], {PREEMPTION_WAIT_KEY: "30000"},
     [((_cid(2),), 130.0), ((_cid(3),), 130.0), None]),
    # no preempt field: no notice
    ([yarn.AllocateResponseProto()], {PREEMPTION_WAIT_KEY: "15000"}, [None]),
])
def test_yarns_preemption_notice_becomes_the_ams(answers, conf, expected):
    client, _ = _client(*answers, conf=conf)
    got = []
    for _ in answers:
        notice = client.allocate(AllocateRequest(APP, 1)).preemption
        got.append(None if notice is None else (notice.containers, notice.deadline))
    assert got == expected


def test_a_lost_node_ends_its_containers_as_node_lost_and_updates_the_am_view():
    lost = copy.deepcopy(NODES)
    next(n for n in lost if n["id"] == "localhost:18110")["state"] = "LOST"
    client, _ = _client(yarn.AllocateResponseProto(allocated_containers=[_container(2, "localhost:18110", 7)]))
    client.allocate(AllocateRequest(APP, 1, asks=(_ask(7),)))
    client.rest.node_list = lost
    client._nodes_read_at = float("-inf")
    update = yarn.NodeReportProto(nodeId=yarn.NodeIdProto(host="localhost", port=18110), node_state=yarn.NS_LOST)
    scheduler = client._rm_call
    scheduler.answers.append(yarn.AllocateResponseProto(updated_nodes=[update], completed_container_statuses=[
        _status(2, -100, "Container released on a *lost* node")]))
    response = client.allocate(AllocateRequest(APP, 1))
    [ended] = response.completed
    assert (ended.exit_status, ended.host) == (ExitStatus.NODE_LOST, "yarn-001")
    assert "node yarn-001 was lost" in ended.diagnostics
    [node] = [n for n in response.node_updates if n.host == "yarn-001"]
    assert node.state is NodeState.LOST


def test_an_allocate_of_another_attempt_is_refused():
    client, _ = _client()
    with pytest.raises(WrongState):
        client.allocate(AllocateRequest(APP, 2))


def test_the_launch_environment_survives_yarns_launch_script():
    assert shell_value('a "b" $HOME `x` \\n') == 'a \\"b\\" \\$HOME \\`x\\` \\\\n'
    env = launch_env({"GOOD_1": "x", "BASH_FUNC_f%%": "() { :; }", "1BAD": "y"})
    assert [(e.key, e.value) for e in env] == [("GOOD_1", "x")]


def test_register_gives_yarn_the_tracking_url_of_the_ams_endpoint():
    """The AM's status page, /why and /metrics (--metrics-port) are where YARN's UI and proxy link to."""
    for url in ("", "http://nm-host:9100/"):
        client = YarnRMClient(YarnTarget("http://rm:8088", "rm:8030", dict(SPECS)), rest=FakeRest(), clock=lambda: 1.0)
        client.app_id, client.attempt, client.tracking_url = APP, 1, url
        client._rm_call = scheduler = FakeScheduler()
        client.register(APP)
        method, request = scheduler.calls[0]
        assert method == "registerApplicationMaster" and request.tracking_url == url


@pytest.mark.parametrize("text", ["container_1796174400000_0001_01_000002", "container_e17_1796174400000_0012_02_000031",
                                  "container_1796174400000_12345_01_1234567"])
def test_container_ids_round_trip(text):
    assert ids.container_id_text(ids.container_id_proto(text)) == text


def test_the_am_container_names_its_application_and_attempt():
    assert ids.attempt_of("container_e3_1796174400000_0007_02_000001") == ("application_1796174400000_0007", 2)
    with pytest.raises(ids.BadYarnId):
        ids.container_id_proto("container_x")


def test_an_application_report_of_the_rest_api():
    report = report_of({"id": APP, "name": "j", "queue": "root.default", "state": "FINISHED", "finalStatus": "FAILED",
                        "diagnostics": "gang x can never run", "startedTime": 1000, "finishedTime": 5000,
                        "amContainerLogs": "http://localhost:18102/node/containerlogs/"
                                           "container_1796174400000_0001_02_000001/root"})
    assert (report.state.value, report.final_status, report.attempt, report.finished_at) == ("FINISHED", "FAILED", 2, 5.0)


def _indexed(nodes, used_on: str, used: tuple[int, ...]):
    """The nodes as a cluster that declares each GPU by index reports them (GPU ``used`` of
    ``used_on`` held by another application)."""
    nodes = copy.deepcopy(nodes)
    for node in nodes:
        for which in ("totalResource", "usedResource"):
            infos = node[which]["resourceInformations"]["resourceInformation"]
            for i in range(4):
                value = 1 if which == "totalResource" else int(node["id"] == used_on and i in used)
                infos.append({"name": f"gangmaster.io/gpu-{i}", "value": value})
            if which == "usedResource" and node["id"] == used_on:
                next(x for x in infos if x["name"] == "yarn.io/gpu")["value"] = len(used)
    return nodes


def test_where_gpus_are_declared_by_index_asks_name_them_and_others_gpus_are_known():
    client, scheduler = _client(nodes=_indexed(NODES, "localhost:18110", (1,)))
    [node] = [n for n in client.cluster_nodes() if n.host == "yarn-001"]
    assert node.free.gpu_mask == 0b1101   # GPU 1 is another application's: YARN says which
    client.allocate(AllocateRequest(APP, 1, asks=(_ask(7, gpus=2, gpu_mask=0b1100),)))
    for request in _sent(scheduler).ask:
        assert sorted((v.key, v.value) for v in request.capability.resource_value_map) == [
            ("gangmaster.io/gpu-2", 1), ("gangmaster.io/gpu-3", 1), ("yarn.io/gpu", 2)]


def test_where_gpus_are_only_counted_others_gpus_are_taken_to_be_the_highest():
    nodes = copy.deepcopy(NODES)
    node = next(n for n in nodes if n["id"] == "localhost:18110")
    next(x for x in node["usedResource"]["resourceInformations"]["resourceInformation"]
         if x["name"] == "yarn.io/gpu")["value"] = 1
    client, scheduler = _client(nodes=nodes)
    [report] = [n for n in client.cluster_nodes() if n.host == "yarn-001"]
    assert report.free.gpu_mask == 0b0111
    client.allocate(AllocateRequest(APP, 1, asks=(_ask(7),)))
    assert [v.key for v in _sent(scheduler).ask[0].capability.resource_value_map] == ["yarn.io/gpu"]


def test_the_gpus_a_real_rm_reports_taken_by_index():
    """A real 3.4.2 RM's node list while a job held GPUs 0,1 of localhost:18110 and all of :18100."""
    nodes = json.loads((FIXTURES / "rest-nodes-gpu-index-3.4.2.json").read_text())["nodes"]["node"]
    client, _ = _client(nodes=nodes)
    free = {n.host: n.free.gpu_mask for n in client.cluster_nodes()}
    assert free == {"yarn-000": 0, "yarn-001": 0b1100, "yarn-002": 0b1111}


def test_the_am_forwards_yarns_notice_to_the_tasks_notice_file(tmp_path):
    """The task's GANGMASTER_PREEMPTION_NOTICE (in its launch) is the file notify_preemption
    fills with the deadline as wall-clock time, which BarrierTaskContext.preemption_notice() reads."""
    client, _ = _client(yarn.AllocateResponseProto(), yarn.AllocateResponseProto(
        allocated_containers=[_container(2, "localhost:18110", 7)]), _preempt(strict=(2,)),
        conf={PREEMPTION_WAIT_KEY: "20000"}, state_dir=tmp_path / "yarn")
    client.allocate(AllocateRequest(APP, 1, asks=(_ask(7),)))
    [c] = client.allocate(AllocateRequest(APP, 1)).allocated
    env = {e.key: e.value for e in client._launch(client._held[c.container_id],
                                                  LaunchContext(("true",))).environment}
    task = BarrierTaskContext("127.0.0.1:1", "token", "job", "gang", 1, 0, 1,
                              preemption_notice_file=env["GANGMASTER_PREEMPTION_NOTICE"])
    assert task.preemption_notice() is None
    with pytest.raises(WrongState):   # not preempted (yet)
        client.notify_preemption(c.container_id)
    notice = client.allocate(AllocateRequest(APP, 1)).preemption
    before = time.time()
    assert client.notify_preemption(c.container_id) == notice.deadline == 120.0
    assert before + 20 <= task.preemption_notice() <= time.time() + 20


@pytest.mark.parametrize("deadline,said", [(115.0, "by 115s"), (math.inf, "when the RM kills them (no deadline known)")])
def test_the_ams_log_says_a_notice_without_deadline_has_none(deadline, said):
    assert by_deadline(deadline) == said
