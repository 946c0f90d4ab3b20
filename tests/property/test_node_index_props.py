"""The node index (selectors/node_index.py) against a brute-force reference: after any
sequence of changed rows taken in (moved one by one, or rebuilt when many change at once;
full nodes parked while no read needs them), on copies changed apart from their
original, ``best`` gives the ``k`` smallest
(key, tie rank) of the nodes in the buckets asked that pass, whichever part of a walk
checks them (one by one, or in chunks)."""
from unittest import mock

import numpy as np
from hypothesis import given, settings, strategies as st

from gangmaster.selectors import node_index
from gangmaster.selectors.node_index import NodeIndex


def reference(keys, buckets, ties, k, lowest, passing):
    entries = sorted((int(keys[i]), int(ties[i]), i) for i in range(len(keys))
                     if buckets[i] >= lowest and passing[i])
    return [i for _, _, i in entries[:k]], [key for key, _, _ in entries[:k]]


@st.composite
def columns(draw, n):
    keys = np.array(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), dtype=np.int64)
    buckets = np.array(draw(st.lists(st.sampled_from([0, 3, 10, 20]), min_size=n, max_size=n)), dtype=np.int64)
    return keys, buckets


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(1, 90), seeded=st.booleans(), threshold=st.sampled_from([2, 64]),
       one_by_one=st.sampled_from([0, 1, 4]), first_chunk=st.sampled_from([1, 3, 32]))
def test_the_index_finds_what_a_sort_of_every_node_finds(data, n, seeded, threshold, one_by_one, first_chunk):
    keys, buckets = data.draw(columns(n))
    ties = np.random.default_rng(n).permutation(n) if seeded else None
    rank = ties if seeded else np.arange(n)
    patches = (mock.patch.object(node_index, "MIN_CHANGED_BEFORE_REBUILD", threshold),
               mock.patch.object(node_index, "ONE_BY_ONE", one_by_one),
               mock.patch.object(node_index, "FIRST_CHUNK", first_chunk))
    for patch in patches:
        patch.start()
    try:
        views = [(NodeIndex(keys, buckets, ties=ties), keys.copy(), buckets.copy())]
        for _ in range(data.draw(st.integers(0, 6))):
            if data.draw(st.booleans()):   # a copy, changed apart from its original from now on
                index, k_col, b_col = views[data.draw(st.integers(0, len(views) - 1))]
                views.append((index.copy(), k_col.copy(), b_col.copy()))
            index, k_col, b_col = views[data.draw(st.integers(0, len(views) - 1))]
            rows = data.draw(st.lists(st.integers(0, n - 1), max_size=n, unique=True))
            for row in rows:
                k_col[row] = data.draw(st.integers(0, 6))
                b_col[row] = data.draw(st.sampled_from([0, 3, 10, 20]))
            index.dirty.update(rows)
            index.sync(k_col, b_col, data.draw(st.sampled_from([0, 3, 10])))   # (full nodes parked above 0)
            if data.draw(st.booleans()):   # a read between changes (its runs' arrays kept in step after)
                read(data, n, rank, index, k_col, b_col)
        for index, k_col, b_col in views:
            read(data, n, rank, index, k_col, b_col)
    finally:
        for patch in patches:
            patch.stop()


def read(data, n, rank, index, k_col, b_col):
    k = data.draw(st.integers(1, 5))
    lowest = data.draw(st.sampled_from([0, 3, 10, 20, 30]))
    index.sync(k_col, b_col, lowest)   # (a read takes rows in for its first bucket)
    passing = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    nodes, found = index.best(k, lowest, lambda rows: passing[rows],
                              data.draw(st.sampled_from([None, lambda node: bool(passing[node])])))
    assert (nodes.tolist(), found.tolist()) == reference(k_col, b_col, rank, k, lowest, passing)
