"""A trusted in-process client (a replay's AMs) skips the RM's checks of a call's form,
never its checks of what the call asks against the RM's state; an ordinary in-process
client and the gRPC server check both."""
from pathlib import Path

import pytest

from gangmaster.protocol.rm_client import InProcessRMClient
from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, InvalidRequest, ResourceRequest
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.simulation import Simulation

SPECS = load_cluster_specs(Path(__file__).resolve().parents[1] / "fixtures" / "rm" / "cluster.yaml")


def registered(trusted: bool):
    rm = Simulation(SPECS, trusted_client=trusted).client
    app = rm.submit(ApplicationSubmission("trusted"))
    rm.register(app)
    return rm, app


def test_only_a_trusted_client_skips_the_form_checks():
    rm, app = registered(trusted=False)
    with pytest.raises(InvalidRequest, match="progress"):
        rm.allocate(AllocateRequest(app, 1, progress=2.0))   # progress is a share: 0..1
    rm, app = registered(trusted=True)
    assert rm.allocate(AllocateRequest(app, 1, progress=2.0)).allocated == ()


@pytest.mark.parametrize("trusted", [False, True])
def test_what_a_call_asks_is_checked_either_way(trusted):
    rm, app = registered(trusted)
    with pytest.raises(InvalidRequest, match="asks\\[0\\].host: unknown host 'nowhere'"):
        rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, R(512, 1), host="nowhere"),)))
    rm.core.check_invariants()
    assert all(n.free == n.capacity for n in rm.cluster_nodes())
