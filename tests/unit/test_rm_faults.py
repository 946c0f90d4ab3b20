"""One table of fault actions (tools/rmsim/faults.py): the scenario reader, ``gangmaster rm
fault`` and the gRPC server offer the same actions, and each does the same thing whichever
way it comes (before the table, ``kill_app`` was missing from the CLI and from gRPC)."""
import argparse
import re
from pathlib import Path

import pytest

from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.tools.rmsim.control import SimulatorControl
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, ApplicationSubmission, AppState, ContainerState, NodeState, NotFound, ResourceRequest,
)
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools import rm_cmd
from gangmaster.tools.rmsim.faults import FAULTS, Fault, apply
from gangmaster.tools.rmsim.scenario import Scenario
from gangmaster.tools.rmsim.server import LiveRM, start_server
from gangmaster.tools.rmsim.simulation import Simulation

RM_FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"

ALL = ["lose_node", "mark_unhealthy", "restore_node", "kill_container", "fail_container", "kill_am", "kill_app",
       "preempt_app"]


def test_the_table_holds_every_action():
    assert list(FAULTS) == ALL


def test_the_cli_offers_every_action_of_the_table():
    parser = argparse.ArgumentParser()
    rm_cmd.add_parser(parser.add_subparsers())
    for action in FAULTS:
        args = parser.parse_args(["rm", "fault", "--address", "127.0.0.1:1", action])
        assert args.action == action


def test_the_scenario_reader_takes_every_action_of_the_table():
    targets = {"host": "host: dgx-000", "app": "app: app_0001", "container": "container: c"}
    for name, action in FAULTS.items():
        scenario = Scenario.parse(f"events: [{{at: 1, do: {name}, {targets[action.target]}}}]")
        assert scenario.steps[0].action == name


def with_a_running_container(core):
    """An application whose AM registered and holds one container on dgx-000."""
    app = core.submit(ApplicationSubmission("f", max_attempts=2))
    core.register(app)
    (c,) = core.allocate(AllocateRequest(app, 1, asks=(
        ResourceRequest(1, R(1024, 1, gpus=1), host="dgx-000", relax_locality=False),))).allocated
    return app, c.container_id


# action, what the fault names ({app}, {cid}: the application's and its container's ids), what must follow
CASES = [
    ("lose_node", {"host": "dgx-000"}, lambda core, app, cid: core.containers[cid].state is ContainerState.KILLED
     and core.ledger.states[core.ledger.host_index["dgx-000"]] is NodeState.LOST),
    ("mark_unhealthy", {"host": "dgx-000"},
     lambda core, app, cid: core.ledger.states[core.ledger.host_index["dgx-000"]] is NodeState.UNHEALTHY),
    ("kill_container", {"container": "{cid}"}, lambda core, app, cid: core.containers[cid].state is ContainerState.KILLED),
    ("kill_container", {"app": "{app}", "host": "dgx-000"},
     lambda core, app, cid: core.containers[cid].state is ContainerState.KILLED),
    ("fail_container", {"app": "{app}", "exit_code": 3},
     lambda core, app, cid: core.containers[cid].exit_status == 3),
    ("kill_am", {"app": "{app}"}, lambda core, app, cid: core.apps[app].attempt == 2),
    ("kill_app", {"app": "{app}"}, lambda core, app, cid: core.apps[app].state is AppState.KILLED),
    ("preempt_app", {"app": "{app}"}, lambda core, app, cid: core.preemptions.under_notice(cid)),
]


def fault(action, given, app, cid):
    fields = {k: v.format(app=app, cid=cid) if isinstance(v, str) else v for k, v in given.items()}
    return Fault(action, **fields)


@pytest.mark.parametrize("action, given, then", CASES, ids=[f"{a}-{'-'.join(g)}" for a, g, _ in CASES])
def test_each_action_in_process(action, given, then):
    core = Simulation(load_cluster_specs(RM_FIX / "cluster.yaml")).core
    app, cid = with_a_running_container(core)
    apply(core, fault(action, given, app, cid), "test")
    assert then(core, app, cid)
    core.check_invariants()


def test_each_action_over_grpc(tmp_path):
    """Every action of the table through the gRPC server, as `gangmaster rm fault` sends it."""
    live = LiveRM(load_cluster_specs(RM_FIX / "cluster.yaml"), work_dir=tmp_path / "tasks", poll_s=0.02)
    server, port = start_server(live)
    try:
        with GrpcRMClient(f"127.0.0.1:{port}", timeout_s=10) as client:
            for action, given, then in CASES:
                live.core.restore_node("dgx-000")
                app, cid = with_a_running_container(live.core)
                f = fault(action, given, app, cid)
                SimulatorControl(client).inject_fault(action, host=f.host, container_id=f.container, app_id=f.app,
                                    exit_code=f.exit_code)
                assert then(live.core, app, cid), action
    finally:
        server.stop(0)
        live.stop()


def test_a_container_fault_on_an_application_without_one_is_not_found():
    core = Simulation(load_cluster_specs(RM_FIX / "cluster.yaml")).core
    app = core.submit(ApplicationSubmission("f"))
    with pytest.raises(NotFound, match=f"no live container of {app} on dgx-000"):
        apply(core, Fault("kill_container", app=app, host="dgx-000"), "test")


GRACES = [
    # (the step, its grace or the message of its refusal)
    ("{at: 1, do: preempt_app, app: app_0001}", 30.0),
    ("{at: 1, do: preempt_app, app: app_0001, graceSeconds: 5}", 5.0),
    ("{at: 1, do: preempt_app, app: app_0001, graceSeconds: -1}", "events[0].graceSeconds: expected a number >= 0, got -1"),
    ("{at: 1, do: kill_app, app: app_0001, graceSeconds: 5}", "events[0].graceSeconds: expected no such field"),
]


@pytest.mark.parametrize("step, expected", GRACES)
def test_a_scenario_preempts_with_the_grace_it_names(step, expected):
    from gangmaster.conf.fields import ConfigError

    if isinstance(expected, str):
        with pytest.raises(ConfigError, match=re.escape(expected)):
            Scenario.parse(f"events: [{step}]")
        return
    (parsed,) = Scenario.parse(f"events: [{step}]").steps
    core = Simulation(load_cluster_specs(RM_FIX / "cluster.yaml")).core
    app, cid = with_a_running_container(core)
    Scenario([parsed])._apply(core, parsed)
    assert core.preemptions.deadlines[cid] == core.now() + expected
