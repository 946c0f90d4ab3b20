"""GPU sharing in the node ledger (the AM's view and the RM's ledger share it), on random
sequences of share and whole-GPU bookings and give-backs, checked against a plain model:

* per GPU, free + used == 1000 milli, never below 0: nothing is double-booked;
* a GPU is in the free mask exactly when it is wholly free (whole-GPU asks never land on
  a shared GPU), and ``gpus_free`` is its count;
* a booking is refused exactly when the model says it does not fit, and a refusal
  changes nothing; a give-back of what is not held is refused;
* the vector fit (``fits``/``room``) agrees with the scalar ``shortfall``, and ``room``
  share instances can be booked one by one while one more is refused;
* a copy of the view (trial placement) books apart from the original.
"""
import numpy as np
from hypothesis import given, settings, strategies as st

from gangmaster.selectors import explanation as why
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.fit import Demand, fits, room, shortfall
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError

GPUS_PER_NODE = [0, 1, 2, 4]


@st.composite
def scenarios(draw):
    gpus = draw(st.lists(st.sampled_from(GPUS_PER_NODE), min_size=1, max_size=4))
    ops = draw(st.lists(st.tuples(st.sampled_from(["share", "whole", "release"]), st.integers(0, 3),
                                  st.integers(0, 3), st.sampled_from([1, 100, 250, 333, 500, 999])),
                        max_size=40))
    return gpus, ops


class Model:
    """Per node and GPU: "free", "whole", or a list of shares (milli)."""

    def __init__(self, gpus):
        self.gpus = [[[] for _ in range(g)] for g in gpus]
        self.whole = [[False] * g for g in gpus]

    def milli_free(self, i, k):
        if k >= len(self.gpus[i]) or self.whole[i][k]:
            return 0
        return 1000 - sum(self.gpus[i][k])

    def wholly_free(self, i, k):
        return k < len(self.gpus[i]) and not self.whole[i][k] and not self.gpus[i][k]


def _check_matches(view: ClusterView, model: Model, width: int) -> None:
    for i in range(len(view)):
        expected = [model.milli_free(i, k) for k in range(width)]
        assert view.gpu_milli_free[i].tolist() == expected
        used = view.used_milli(i).tolist()
        for k in range(width):
            if k < len(model.gpus[i]):
                assert used[k] + expected[k] == 1000
            else:
                assert used[k] == 0 and expected[k] == 0
        mask = sum(1 << k for k in range(width) if model.wholly_free(i, k))
        assert int(view.gpu_free_mask[i]) == mask
        assert int(view.gpus_free[i]) == bin(mask).count("1")
        assert int(view.gpu_share_max_free[i]) == max(expected)
        assert int(view.gpus_shared[i]) == sum(1 for k in range(len(model.gpus[i])) if model.gpus[i][k])


@settings(max_examples=150)
@given(scenarios())
def test_share_ledger_matches_the_model(scenario):
    gpus, ops = scenario
    view = ClusterView([NodeSpec(f"n{i}", gpus=g, memory_mb=1000, vcores=4) for i, g in enumerate(gpus)])
    model = Model(gpus)
    width = view.gpu_width
    held: list[tuple[int, ResourceDescriptor]] = []
    for kind, node, gpu, amount in ops:
        i = node % len(gpus)
        if kind == "release":
            if not held:
                continue
            at, resource = held.pop(gpu % len(held))
            view.release(at, resource)
            k = resource.gpu_mask.bit_length() - 1
            if resource.gpu_milli:
                model.gpus[at][k].remove(resource.gpu_milli)
            else:
                model.whole[at][k] = False
        else:
            share = kind == "share"
            resource = (ResourceDescriptor(gpu_milli=amount, gpu_mask=1 << gpu) if share
                        else ResourceDescriptor(gpu_mask=1 << gpu))
            ok = (model.milli_free(i, gpu) >= amount) if share else model.wholly_free(i, gpu)
            before = view.gpu_milli_free.copy()
            try:
                view.allocate(i, resource)
            except ResourceError:
                assert not ok, f"refused {resource} on n{i} although it fits"
                assert (view.gpu_milli_free == before).all(), "a refusal changed the ledger"
                continue
            assert ok, f"booked {resource} on n{i} although it does not fit"
            held.append((i, resource))
            if share:
                model.gpus[i][gpu].append(amount)
            else:
                model.whole[i][gpu] = True
        _check_matches(view, model, width)
    # a give-back of what is not held is refused
    for i, g in enumerate(gpus):
        for k in range(g):
            if not model.gpus[i][k]:
                try:
                    view.release(i, ResourceDescriptor(gpu_milli=1, gpu_mask=1 << k))
                except ResourceError:
                    pass
                else:
                    raise AssertionError(f"gave back a share of GPU {k} on n{i} that nobody held")


@settings(max_examples=100)
@given(scenarios(), st.sampled_from([1, 250, 300, 500, 700, 999]))
def test_vector_fit_agrees_with_scalar_and_room_is_exact(scenario, need):
    gpus, ops = scenario
    view = ClusterView([NodeSpec(f"n{i}", gpus=g) for i, g in enumerate(gpus)])
    for kind, node, gpu, amount in ops:   # a random state, bookings that fit kept
        resource = (ResourceDescriptor(gpu_milli=amount, gpu_mask=1 << gpu) if kind == "share"
                    else ResourceDescriptor(gpu_mask=1 << gpu))
        try:
            view.allocate(node % len(gpus), resource)
        except ResourceError:
            pass
    demand = Demand.of(ResourceDescriptor(gpu_milli=need))
    ok, rooms = fits(view, demand), room(view, demand)
    ledger = view.gpu_milli_free.copy()
    for i in range(len(view)):
        scalar = shortfall(demand, view.amounts(i))
        assert (scalar is None) == bool(ok[i]) == (rooms[i] >= 1)
        if scalar is not None:
            assert scalar == why.GPU_SHARE
        copy = view.copy()
        for _ in range(int(rooms[i])):   # each on the GPU with the most left
            free = copy.gpu_milli_free[i]
            copy.allocate(i, ResourceDescriptor(gpu_milli=need, gpu_mask=1 << int(np.argmax(free))))
        assert not fits(copy, demand)[i], "room was short by one"
        assert (view.gpu_milli_free == ledger).all(), "booking on a copy changed the original's ledger"
    # the copies booked apart: the original is as it was
    assert (fits(view, demand) == ok).all()


def test_a_share_and_a_whole_gpu_never_meet():
    view = ClusterView([NodeSpec("n0", gpus=2)])
    view.allocate("n0", ResourceDescriptor(gpu_milli=250, gpu_mask=0b01))
    assert int(view.gpu_free_mask[0]) == 0b10 and int(view.gpus_free[0]) == 1
    try:
        view.allocate("n0", ResourceDescriptor(gpu_mask=0b01))
    except ResourceError as error:
        assert "does not fit" in str(error)
    else:
        raise AssertionError("a whole-GPU booking landed on a shared GPU")
    view.allocate("n0", ResourceDescriptor(gpu_mask=0b10))
    try:
        view.allocate("n0", ResourceDescriptor(gpu_milli=1, gpu_mask=0b10))
    except ResourceError:
        pass
    else:
        raise AssertionError("a share landed on a GPU taken whole")
    view.release("n0", ResourceDescriptor(gpu_milli=250, gpu_mask=0b01))
    assert int(view.gpu_free_mask[0]) == 0b01 and view.gpu_milli_free[0].tolist() == [1000, 0]
