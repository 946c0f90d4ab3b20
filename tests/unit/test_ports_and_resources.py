import re

import pytest

from gangmaster.selectors.ports import PortError, PortRanges
from gangmaster.selectors.resources import ResourceDescriptor as R, ResourceError


@pytest.mark.parametrize("text, expected", [
    ("8000-8002,8003", ((8000, 8003),)),          # adjacent ranges merge
    ("9000, 8000-8100, 8050-8200", ((8000, 8200), (9000, 9000))),
    ("", ()),
])
def test_parse_and_coalesce(text, expected):
    assert PortRanges.parse(text).ranges == expected


@pytest.mark.parametrize("text, message", [
    ("8000-7000", "begin is greater than end"),
    ("70000", "within 0..65535"),
    ("80a0", "expected ports like"),
])
def test_bad_port_ranges_say_why(text, message):
    with pytest.raises(PortError, match=message):
        PortRanges.parse(text)


def test_taking_more_ports_than_free_fails_clearly():
    with pytest.raises(PortError, match=r"need 5 port\(s\) >= 100, only 2 free"):
        PortRanges.of((99, 101)).take_sequential(5, minimum=100)


def test_mask_sets_the_gpu_count_and_must_agree_with_it():
    assert R(gpu_mask=0b1010).gpus == 2
    with pytest.raises(ResourceError, match="disagrees"):
        R(gpus=3, gpu_mask=0b1010)


def test_requested_mask_must_be_a_subset_of_the_free_mask():
    free = R(1000, 8, gpu_mask=0b0111)
    assert R(10, 1, gpu_mask=0b0011).fits_in(free)
    assert not R(10, 1, gpu_mask=0b1001).fits_in(free)
    assert R(10, 1, gpus=3).fits_in(free)
    assert not R(10, 1, gpus=4).fits_in(free)


def test_add_subtract_roundtrip_and_refusals():
    node = R(1000, 8, gpu_mask=0b1111, port_ranges=PortRanges.of((100, 199)))
    ask = R(100, 2.5, gpu_mask=0b0101, port_ranges=PortRanges.of((100, 101)))
    left = node.subtract(ask)
    assert left == R(900, 5.5, gpu_mask=0b1010, port_ranges=PortRanges.of((102, 199)))
    assert left.add(ask) == node
    with pytest.raises(ResourceError, match="overlap"):
        left.add(R(gpu_mask=0b0010))
    with pytest.raises(ResourceError, match="does not fit"):
        left.subtract(R(2000))
    with pytest.raises(ResourceError, match="name the GPUs"):
        node.subtract(R(gpus=1))
    with pytest.raises(ResourceError, match="memory_mb"):
        R(memory_mb=-1)


@pytest.mark.parametrize("changes, message", [
    ({"vcores": float("nan")}, "vcores: expected a finite number >= 0, got nan"),
    ({"vcores": float("inf")}, "vcores: expected a finite number >= 0, got inf"),
    ({"gpu_mask": 1 << 64}, "gpu_mask: names GPU(s) beyond the 64-GPU limit"),
])
def test_a_resource_that_cannot_exist_is_refused(changes, message):
    with pytest.raises(ResourceError, match=re.escape(message)):
        R(**changes)
