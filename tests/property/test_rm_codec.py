"""The gRPC codec is lossless: every protocol message survives encode → decode."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangmaster.protocol import rm_codec as codec
from gangmaster.protocol.proto import rm_pb2 as pb
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationReport, AppState, Container, ContainerState, ContainerStatus,
    InvalidRequest, LaunchContext, NodeReport, NodeState, PendingAsk, RegisterResponse, Rejection, ResourceRequest,
)
from gangmaster.protocol.reasons import other
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

names = st.text("abcdefgh-_0123456789", min_size=1, max_size=12)
#: a reason as an old peer sends it, its text alone (free text: no NUL, as the codec checks)
reason_words = st.text(st.characters(blacklist_characters="\x00"), max_size=20).map(other)
opt_names = st.one_of(st.none(), names)
ranges = st.lists(st.tuples(st.integers(0, 65000), st.integers(0, 30)), max_size=3).map(
    lambda rs: PortRanges.of(*[(b, b + n) for b, n in rs]))
whole = st.builds(
    lambda mem, mvc, mask, count, ports: ResourceDescriptor(mem, mvc / 1000, 0 if mask else count, mask,
                                                            port_ranges=ports),
    st.integers(0, 2 ** 40), st.integers(0, 10 ** 6), st.integers(0, 2 ** 64 - 1), st.integers(0, 64), ranges)
#: a share of one GPU: left to the RM (no mask) or on one named GPU
shares = st.builds(
    lambda mem, mvc, gpu, milli, ports: ResourceDescriptor(mem, mvc / 1000, gpu_mask=0 if gpu is None else 1 << gpu,
                                                           port_ranges=ports, gpu_milli=milli),
    st.integers(0, 2 ** 40), st.integers(0, 10 ** 6), st.one_of(st.none(), st.integers(0, 63)),
    st.integers(1, 999), ranges)
resources = st.one_of(whole, whole, shares)
milli_free = st.one_of(st.none(), st.lists(st.integers(0, 1000), min_size=1, max_size=64).map(tuple))
asks = st.builds(ResourceRequest, st.integers(0, 2 ** 40), resources, st.integers(1, 1000), opt_names, opt_names,
                 st.booleans(), opt_names, st.integers(-5, 5))
containers = st.builds(Container, names, names, st.integers(1, 9), names, names, resources, st.integers(0, 99),
                       st.floats(0, 1e6, allow_nan=False))
statuses = st.builds(ContainerStatus, names, names, st.sampled_from(ContainerState),
                     st.one_of(st.none(), st.integers(-1000, 255)), st.text(max_size=20), st.integers(0, 99))
nodes = st.builds(NodeReport, names, names, st.sampled_from(NodeState), resources, resources,
                  st.frozensets(names, max_size=3), opt_names, opt_names, st.integers(0, 99), st.text(max_size=10),
                  milli_free, st.lists(st.tuples(names, names), max_size=3).map(tuple))


@given(st.builds(AllocateRequest, names, st.integers(1, 9), st.lists(asks, max_size=4).map(tuple),
                 st.lists(st.integers(0, 99), max_size=3).map(tuple), st.lists(names, max_size=3).map(tuple),
                 st.lists(names, max_size=3).map(tuple), st.lists(names, max_size=3).map(tuple),
                 st.floats(0, 1)))
def test_allocate_request_round_trip(req):
    assert codec.allocate_request_from_pb(pb.AllocateRequest.FromString(
        codec.allocate_request_to_pb(req).SerializeToString())) == req


@given(st.builds(AllocateResponse, st.lists(containers, max_size=3).map(tuple), st.lists(statuses, max_size=3).map(tuple),
                 st.lists(nodes, max_size=3).map(tuple),
                 st.lists(st.builds(Rejection, st.integers(0, 99), reason_words), max_size=2).map(tuple),
                 st.lists(st.builds(PendingAsk, st.integers(0, 99), st.integers(0, 99), reason_words),
                          max_size=2).map(tuple),
                 resources, st.integers(0, 10 ** 6)))
def test_allocate_response_round_trip(resp):
    assert codec.allocate_response_from_pb(pb.AllocateResponse.FromString(
        codec.allocate_response_to_pb(resp).SerializeToString())) == resp


@given(st.builds(RegisterResponse, names, st.integers(1, 9), names, resources, st.lists(containers, max_size=2).map(tuple),
                 st.one_of(st.none(), resources)),
       st.builds(ApplicationReport, names, names, names, st.sampled_from(AppState), st.integers(1, 9),
                 st.floats(0, 1e6), st.one_of(st.none(), st.floats(0, 1e6)), names, st.text(max_size=10),
                 st.integers(0, 99), st.integers(0, 99), resources, st.integers(0, 2 ** 40)),
       st.builds(LaunchContext.of, st.lists(names, max_size=3), st.dictionaries(names, st.text(max_size=8), max_size=3)))
def test_other_messages_round_trip(reg, report, launch):
    assert codec.register_from_pb(codec.register_to_pb(reg)) == reg
    assert codec.report_from_pb(codec.report_to_pb(report)) == report
    assert codec.launch_from_pb(codec.launch_to_pb(launch)) == launch


def test_a_node_report_with_per_gpu_milli_out_of_range_is_refused():
    """The AM trusts a node report's per-GPU milli (its view books on them): one past 1000,
    or more GPUs than a node can have, is refused naming the field."""
    msg = pb.NodeReport(host="n", rack="r", state="RUNNING", gpu_milli_free=[1000, 1001])
    with pytest.raises(InvalidRequest, match=r"gpu_milli_free: expected milli-GPU within 0..1000 per GPU"):
        codec.node_from_pb(msg)
    msg = pb.NodeReport(host="n", rack="r", state="RUNNING", gpu_milli_free=[0] * 65)
    with pytest.raises(InvalidRequest, match=r"gpu_milli_free: expected at most 64 entries"):
        codec.node_from_pb(msg)


@pytest.mark.parametrize("domains, message", [
    (["switch"], "domains: expected level=name entries, got 'switch'"),
    (["=leaf-1"], "domains: expected level=name entries, got '=leaf-1'"),
    (["switch="], "domains: expected level=name entries, got 'switch='"),
    (["a=b"] * 17, "domains: expected at most 16 entries"),
])
def test_a_node_reports_network_domains_are_level_name_pairs(domains, message):
    with pytest.raises(InvalidRequest, match=message):
        codec.node_from_pb(pb.NodeReport(host="n", rack="r", state="RUNNING", domains=domains))
