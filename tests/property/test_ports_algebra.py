"""Port-range algebra agrees with set algebra on the ports the ranges cover."""
import random

from hypothesis import given, strategies as st

from gangmaster.selectors.ports import PortRanges

pairs = st.tuples(st.integers(0, 200), st.integers(0, 30)).map(lambda p: (p[0], p[0] + p[1]))
ranges = st.lists(pairs, max_size=6).map(lambda ps: PortRanges.of(*ps))


def ports(r: PortRanges) -> set:
    return set(r)


@given(ranges)
def test_coalesced_ranges_are_sorted_disjoint_and_not_adjacent(r):
    for (b1, e1), (b2, e2) in zip(r.ranges, r.ranges[1:]):
        assert b1 <= e1 and e1 + 1 < b2


@given(ranges, ranges)
def test_set_operations(a, b):
    assert ports(a.add(b)) == ports(a) | ports(b)
    assert ports(a.intersect(b)) == ports(a) & ports(b)
    assert ports(a.subtract(b)) == ports(a) - ports(b)
    assert a.fits_in(b) == (ports(a) <= ports(b))
    assert a.count == len(ports(a))


@given(ranges, st.integers(0, 250))
def test_counting_ports_at_or_above_a_minimum(r, minimum):
    assert r.count_at_or_above(minimum) == len({p for p in ports(r) if p >= minimum}) == r.above(minimum).count


@given(ranges, st.integers(0, 40), st.integers(0, 250), st.integers(0, 5))
def test_taking_ports(r, count, minimum, seed):
    pool = {p for p in ports(r) if p >= minimum}
    if count > len(pool):
        return
    seq = r.take_sequential(count, minimum)
    assert ports(seq) == set(sorted(pool)[:count])
    rnd = r.take_random(count, random.Random(seed), minimum)
    assert ports(rnd) <= pool and rnd.count == count
    assert rnd == r.take_random(count, random.Random(seed), minimum)
