"""Starting a gang's containers in one call (``start_containers``), both ways (in process
and over gRPC): the shared launch is sent and checked once, each container adds its own;
the RM starts them in order and stops at the first it cannot start."""
import re

import pytest

from gangmaster.protocol.rm_protocol import (
    AllocateRequest, ApplicationSubmission, ContainerLaunch, ContainerState, InvalidRequest, LaunchContext, NotFound, ResourceRequest,
    StartContainers, WrongState,
)
from gangmaster.conf import limits
from gangmaster.selectors.resources import ResourceDescriptor as R



def granted(rm, n):
    app = rm.submit(ApplicationSubmission("batch"))
    rm.register(app)
    asks = tuple(ResourceRequest(k + 1, R(256, 0.5)) for k in range(n))
    containers = rm.allocate(AllocateRequest(app, 1, asks=asks)).allocated
    assert len(containers) == n
    return [c.container_id for c in containers]


def states(rm, cids):
    return [rm.container_status(cid).state for cid in cids]


def test_every_container_starts_with_the_shared_variables_under_its_own(rm):
    cids = granted(rm, 3)
    shared = LaunchContext(("true",), (("ROLE", "shared"), ("JOB", "j")))
    own = [LaunchContext(env=(("INDEX", str(k)),)) for k in range(2)] + [
        LaunchContext(("true", "again"), (("ROLE", "mine"),))]
    refused = rm.start_containers(StartContainers(
        tuple(ContainerLaunch(cid, launch) for cid, launch in zip(cids, own)), shared))
    assert refused is None
    assert states(rm, cids) == [ContainerState.RUNNING] * 3 or all(
        s.finished for s in states(rm, cids))          # live: `true` may have exited already
    launches = [rm.core.containers[cid].launch for cid in cids]
    assert [launch.env_dict for launch in launches] == [
        {"ROLE": "shared", "JOB": "j", "INDEX": "0"}, {"ROLE": "shared", "JOB": "j", "INDEX": "1"},
        {"ROLE": "mine", "JOB": "j"}]
    assert [launch.command for launch in launches] == [("true",), ("true",), ("true", "again")]
    rm.core.check_invariants()


@pytest.mark.parametrize("fault, error, message", [
    ("unknown", NotFound, "unknown container 'container_nope'"),
    ("bad launch", InvalidRequest, r"containers\[1\].launch.env\[0\].value \(A\): expected no NUL"),
    ("started twice", WrongState, "only an ALLOCATED container can be started"),
])
def test_the_first_container_refused_stops_the_batch(rm, fault, error, message):
    cids = granted(rm, 3)
    own = [LaunchContext(("true",))] * 3
    if fault == "unknown":
        cids[1] = "container_nope"
    elif fault == "bad launch":
        own[1] = LaunchContext(("true",), (("A", "x\x00"),))
    else:
        rm.start_container(cids[1], LaunchContext(("true",)))
    refused = rm.start_containers(StartContainers(tuple(ContainerLaunch(c, o) for c, o in zip(cids, own))))
    assert (refused.index, refused.container_id) == (1, cids[1])
    assert isinstance(refused.error, error)
    assert re.search(message, refused.error.message)
    assert rm.container_status(cids[0]).state is not ContainerState.ALLOCATED   # started before the refusal
    assert rm.container_status(cids[2]).state is ContainerState.ALLOCATED       # never tried
    rm.core.check_invariants()


def test_a_bad_shared_launch_refuses_the_whole_batch(rm):
    cids = granted(rm, 2)
    with pytest.raises(InvalidRequest, match=r"shared.env\[0\].name: expected a non-empty name without '='"):
        rm.start_containers(StartContainers(tuple(ContainerLaunch(c, LaunchContext(("true",))) for c in cids),
                                            LaunchContext(env=(("A=B", "x"),))))
    assert states(rm, cids) == [ContainerState.ALLOCATED] * 2


def test_the_launch_limits_hold_for_the_shared_and_own_launch_together(rm, monkeypatch):
    """``true`` + ``K=v`` + ``O=w`` take 5 + 4 + 4 bytes with their NULs."""
    cids = granted(rm, 1)
    monkeypatch.setattr(limits, "RM_MAX_LAUNCH_BYTES", 12)
    shared = LaunchContext(("true",), (("K", "v"),))
    refused = rm.start_containers(StartContainers((ContainerLaunch(cids[0], LaunchContext(env=(("O", "w"),))),),
                                                  shared))
    assert refused is not None and isinstance(refused.error, InvalidRequest)
    assert "containers[0].launch: command and environment take 13 bytes, over the limit of 12" in \
        refused.error.message
    monkeypatch.setattr(limits, "RM_MAX_ENV_VARS", 1)
    monkeypatch.setattr(limits, "RM_MAX_LAUNCH_BYTES", 1024)
    refused = rm.start_containers(StartContainers((ContainerLaunch(cids[0], LaunchContext(env=(("O", "w"),))),),
                                                  shared))
    assert "containers[0].launch.env: expected at most 1 entries (RM_MAX_ENV_VARS), got 2" in refused.error.message
    assert states(rm, cids) == [ContainerState.ALLOCATED]


def test_the_batch_length_is_bounded(rm, monkeypatch):
    cids = granted(rm, 2)
    monkeypatch.setattr(limits, "RM_MAX_CONTAINERS_PER_APP", 1)
    with pytest.raises(InvalidRequest, match=r"containers: expected at most 1 entries \(RM_MAX_CONTAINERS_PER_APP\)"):
        rm.start_containers(StartContainers(tuple(ContainerLaunch(c, LaunchContext(("true",))) for c in cids)))
    assert states(rm, cids) == [ContainerState.ALLOCATED] * 2
