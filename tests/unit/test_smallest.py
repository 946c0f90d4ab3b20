"""The k smallest keys without a full partition: the same positions as a full sort by
(key, tie rank), with many equal keys, few distinct ones, floats and given ties."""
import numpy as np
from hypothesis import given, strategies as st

from gangmaster.selectors.candidates import kth_smallest, smallest

keys_arrays = st.lists(st.one_of(st.integers(-3, 3), st.integers(-2**62, 2**62)), min_size=1, max_size=3000).map(
    lambda values: np.array(values, dtype=np.int64))


@given(keys=keys_arrays, k=st.integers(1, 40), seeded=st.booleans(), data=st.data())
def test_smallest_is_the_head_of_a_full_sort(keys, k, seeded, data):
    ties = np.random.default_rng(data.draw(st.integers(0, 9))).permutation(keys.size) if seeded else None
    second = np.arange(keys.size) if ties is None else ties
    expected = np.lexsort((second, keys))[:k]
    assert smallest(keys, k, ties).tolist() == expected.tolist()
    if k <= keys.size:
        assert kth_smallest(keys, k) == np.sort(keys)[k - 1]


def test_float_keys_and_a_mass_of_equal_keys():
    keys = np.concatenate([np.full(50_000, 7.5), np.linspace(0, 10, 1_000)])
    expected = np.lexsort((np.arange(keys.size), keys))[:16]
    assert smallest(keys, 16).tolist() == expected.tolist()
