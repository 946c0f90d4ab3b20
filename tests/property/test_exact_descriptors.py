"""ResourceDescriptor.exactly (the unchecked constructor for values made of checked ones)
makes the same value as the checked constructor."""
from hypothesis import given, strategies as st

from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

pairs = st.tuples(st.integers(0, 60000), st.integers(0, 50)).map(lambda p: (p[0], p[0] + p[1]))
ranges = st.lists(pairs, max_size=4).map(lambda ps: PortRanges.of(*ps))


@given(st.integers(0, 10**7), st.integers(0, 512_000), st.integers(0, 2**64 - 1), ranges)
def test_exactly_is_the_checked_value(memory_mb, mvcores, gpu_mask, ports):
    fast = ResourceDescriptor.exactly(memory_mb, mvcores / 1000.0, gpu_mask, ports)
    checked = ResourceDescriptor(memory_mb, mvcores / 1000.0, bin(gpu_mask).count("1"), gpu_mask,
                                 port_ranges=ports)
    assert fast == checked and hash(fast) == hash(checked)
    assert (repr(fast), str(fast)) == (repr(checked), str(checked))
    assert (fast.gpus, fast.ports) == (checked.gpus, checked.ports)
