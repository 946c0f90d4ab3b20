"""The fit model (selectors/fit.py): fits, room and the scalar reasons, table-driven."""
import numpy as np
import pytest

from gangmaster.selectors import explanation as why
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.fit import UNBOUNDED, Demand, fits, room, shortfall
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor as R, ResourceError

LOW = PortRanges.of((1000, 1009))      # all below port_min
HIGH = PortRanges.of((20000, 20009))


def view():
    return ClusterView([
        NodeSpec("big", memory_mb=100_000, vcores=40, gpus=8, ports=HIGH),
        NodeSpec("small", memory_mb=10_000, vcores=4, gpus=2, ports=HIGH),
        NodeSpec("low-ports", memory_mb=100_000, vcores=40, gpus=8, ports=LOW),
        NodeSpec("cpu", memory_mb=50_000, vcores=16.5, gpus=0, ports=LOW.add(HIGH)),
    ])


@pytest.mark.parametrize("ask, port_min, room_expected", [
    (R(memory_mb=5_000), 0, [20, 2, 20, 10]),
    (R(vcores=0.7), 0, [57, 5, 57, 23]),
    (R(gpus=2), 0, [4, 1, 4, 0]),
    (R(gpu_mask=0b100), 0, [1, 0, 1, 0]),
    (R(ports=3), 0, [3, 3, 3, 6]),
    (R(ports=3), 20000, [3, 3, 0, 3]),
    (R(port_ranges=PortRanges.of((1000, 1001))), 20000, [0, 0, 1, 1]),  # explicit ports: port_min not applied
    (R(memory_mb=30_000, gpus=1, ports=1), 20000, [3, 0, 0, 0]),
])
def test_room_and_fits_per_node(ask, port_min, room_expected):
    v, d = view(), Demand.of(ask)
    assert room(v, d, port_min).tolist() == room_expected
    assert fits(v, d, port_min).tolist() == [r >= 1 for r in room_expected]
    rows = np.array([3, 1])
    assert room(v, d, port_min, rows=rows).tolist() == [room_expected[3], room_expected[1]]
    assert fits(v, d, port_min, rows=rows).tolist() == [room_expected[3] >= 1, room_expected[1] >= 1]


def test_a_demand_of_nothing_is_unbounded():
    assert (room(view(), Demand.of(R())) == UNBOUNDED).all()
    assert fits(view(), Demand.of(R())).all()


def test_shortfall_names_the_first_short_dimension():
    v = view()
    cases = [(R(memory_mb=20_000, gpus=4), 1, why.MEMORY), (R(vcores=5, gpus=4), 1, why.VCORES),
             (R(gpus=3), 1, why.GPUS), (R(gpu_mask=0b100), 1, why.GPU_MASK),
             (R(ports=1), 2, why.PORTS), (R(ports=1), 0, None)]
    for ask, node, reason in cases:
        assert shortfall(Demand.of(ask), v.amounts(node), port_min=20000) == reason, ask


def test_ports_below_port_min_never_fit_and_room_counts_the_rest():
    v, d = view(), Demand.of(R(ports=4))
    assert not fits(v, d, 20000, empty=True)[2]         # capacity too: it can never fit there
    assert room(v, d, 20000).tolist() == [2, 2, 0, 2]
    v.allocate("cpu", R(port_ranges=PortRanges.of((20000, 20005))))
    assert room(v, d, 20000).tolist() == [2, 2, 0, 1]    # the cached column follows the booking
    assert room(v, d, 0).tolist() == [2, 2, 2, 3]


def test_booking_refuses_with_the_reason_and_changes_nothing():
    v = view()
    before = v.free(1)
    with pytest.raises(ResourceError, match=r"host small: .* does not fit in free .*\(gpu-mask\)"):
        v.allocate("small", R(memory_mb=1, gpu_mask=0b100))
    assert v.free(1) == before
