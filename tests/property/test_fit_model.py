"""The fit model's invariants, on random clusters and asks.

* free + used == capacity after any sequence of bookings and give-backs, on the AM's
  ClusterView and on the RM's ledger (both are NodeColumns);
* ``room(i)`` instances can be booked one by one on node ``i`` and one more is refused;
* ``fits`` agrees with ``room >= 1``, with the scalar ``shortfall``, with
  ``ResourceDescriptor.fits_in`` and with the filter chain's resource verdict;
* the RM's ledger books exactly what fits; the AM's view read from the RM's node
  reports is the RM's usage and health.

Shares of one GPU (``gpu_milli``, free or pinned to a GPU) are among the asks on the AM's
view (the RM ledger's take of a share is tools/rmsim's, held by its own suites): per GPU,
milli free + milli used = 1000, and a share takes the tightest GPU that fits.
"""
import numpy as np
from hypothesis import given, settings, strategies as st

from gangmaster.protocol.rm_protocol import NodeReport, NodeState, view_from_nodes
from gangmaster.gpu_topology.masks import lowest_bits, popcount
from gangmaster.selectors.cluster import ClusterView, NodeColumns, NodeSpec
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.filters import FilterContext, ResourceFitFilter
from gangmaster.selectors.fit import UNBOUNDED, Demand, fits, room, shortfall
from gangmaster.selectors.ports import PortError, PortRanges
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError
from gangmaster.selectors.selector import get_selector, tightest_gpu
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.rmsim.ledger import Booking, NodeLedger, exact_booking

PORT_MIN = 20000
VCORES = [0, 0.3, 0.5, 1, 2.7, 4]

# ports around port_min, so that some nodes have free ports on both sides of it
port_ranges = st.lists(st.tuples(st.integers(19996, 20003), st.integers(0, 4)), max_size=3).map(
    lambda pairs: PortRanges.of(*((b, b + w) for b, w in pairs)))

node_specs = st.builds(
    lambda i, memory, vcores, gpus, ports: NodeSpec(f"n{i}", f"r{i % 2}", memory_mb=memory, vcores=vcores,
                                                    gpus=gpus, ports=ports),
    st.just(0), st.sampled_from([0, 1000, 3000, 8000]), st.sampled_from(VCORES), st.integers(0, 4), port_ranges)


@st.composite
def clusters(draw):
    specs = draw(st.lists(node_specs, min_size=1, max_size=6))
    return [NodeSpec(f"n{i}", s.rack, memory_mb=s.memory_mb, vcores=s.vcores, gpus=s.gpus, ports=s.ports)
            for i, s in enumerate(specs)]


asks = st.one_of(
    st.builds(lambda m, v, g, p: ResourceDescriptor(memory_mb=m, vcores=v, gpus=g, ports=p),
              st.sampled_from([0, 0, 500, 1000, 3000]), st.sampled_from([0, 0] + VCORES), st.integers(0, 3),
              st.integers(0, 4)),
    st.builds(lambda m, mask: ResourceDescriptor(memory_mb=m, gpu_mask=mask),
              st.sampled_from([0, 1000]), st.integers(1, 15)),
    st.builds(lambda v, r: ResourceDescriptor(vcores=v, port_ranges=r), st.sampled_from(VCORES),
              port_ranges.filter(bool)),
)


share_asks = st.builds(lambda m, share, pin: ResourceDescriptor(memory_mb=m, gpu_milli=share, gpu_mask=pin),
                       st.sampled_from([0, 1000]), st.sampled_from([250, 400, 500, 999]),
                       st.sampled_from([0, 0, 0, 1, 2, 8]))
view_asks = st.one_of(asks, share_asks)   # what the AM's view is asked (the RM ledger: `asks`)


def exact(columns: NodeColumns, i: int, demand: Demand, port_min: int) -> Demand | None:
    """The exact GPUs and ports one instance of ``demand`` would take on node ``i`` (the
    lowest free ones; for a share the GPU named, or the tightest that fits; ports at or
    above ``port_min``), or None when there are too few."""
    free_mask = int(columns.gpu_free_mask[i])
    if demand.gpu_milli:
        milli_free = columns.gpu_milli_free_rows([i])[0]
        if not demand.gpu_mask and milli_free.max() < demand.gpu_milli:
            return None
        mask = demand.gpu_mask or 1 << tightest_gpu(milli_free, demand.gpu_milli)
    else:
        mask = demand.gpu_mask or (lowest_bits(free_mask, demand.gpus) if demand.gpus else 0)
        if popcount(mask) != demand.gpus:
            return None
    ports = demand.port_ranges
    if not ports and demand.ports:
        try:
            ports = columns.ports_free[i].take_sequential(demand.ports, port_min)
        except PortError:
            return None
    return Demand(demand.memory_mb, demand.mvcores, demand.gpus, mask, ports.count, ports, demand.gpu_milli)


def book_exact(columns: NodeColumns, i: int, demand: Demand, port_min: int) -> Demand:
    """Book one instance through the public API: the ledger's take, the view's allocate."""
    taken = exact(columns, i, demand, port_min)
    if taken is None:
        raise ResourceError("too few GPUs or ports")
    if isinstance(columns, NodeLedger):
        columns.take(i, _booking(taken))
    else:
        columns.allocate(i, _descriptor(taken))
    return taken


def give_back(columns: NodeColumns, i: int, taken: Demand) -> None:
    if isinstance(columns, NodeLedger):
        columns.give_back(i, _booking(taken))
    else:
        columns.release(i, _descriptor(taken))


def assert_free_plus_used_is_capacity(columns: NodeColumns, held: list[tuple[int, Demand]]) -> None:
    for i, spec in enumerate(columns.specs):
        mine = [d for node, d in held if node == i]
        used_mask = 0
        used_ports = PortRanges()
        shares = [0] * columns.gpu_width   # milli held by shares, per GPU
        for d in mine:
            if d.gpu_milli:
                shares[d.gpu_mask.bit_length() - 1] += d.gpu_milli
            else:
                assert not used_mask & d.gpu_mask
                used_mask |= d.gpu_mask
            assert not used_ports.intersect(d.port_ranges)
            used_ports = used_ports.add(d.port_ranges)
        shared_mask = sum(1 << k for k, milli in enumerate(shares) if milli)
        assert not used_mask & shared_mask                 # a GPU is taken whole or shared, never both
        for k in range(columns.gpu_width):                 # free + used = 1000 per GPU (0 past the node's GPUs)
            used = 1000 if used_mask >> k & 1 else shares[k]
            assert used <= 1000
            assert columns.gpu_milli_free[i, k] == ((1000 - used) if k < spec.gpus else 0)
        used_mask |= shared_mask
        assert columns.memory_free[i] + sum(d.memory_mb for d in mine) == columns.memory_capacity[i]
        assert columns.mvcores_free[i] + sum(d.mvcores for d in mine) == columns.mvcores_capacity[i]
        assert int(columns.gpu_free_mask[i]) | used_mask == int(columns.gpu_capacity_mask[i])
        assert not int(columns.gpu_free_mask[i]) & used_mask
        assert columns.gpus_free[i] == popcount(int(columns.gpu_free_mask[i]))
        assert columns.ports_free[i].add(used_ports) == spec.ports
        assert not columns.ports_free[i].intersect(used_ports)
        assert columns.ports_free_count[i] == columns.ports_free[i].count
        above = columns.ports_free_at_or_above(PORT_MIN)[i]
        assert above == columns.ports_free[i].above(PORT_MIN).count  # the cached column follows


operations = st.lists(st.tuples(st.booleans(), st.integers(0, 5), view_asks), max_size=25)


def _shares_left_cover(held: list[tuple[int, Demand]], i: int, d: Demand) -> bool:
    """Whether the shares still held on ``d``'s GPU of node ``i`` add up to ``d``'s share."""
    return bool(d.gpu_milli) and sum(o.gpu_milli for node, o in held
                                     if node == i and o.gpu_milli and o.gpu_mask == d.gpu_mask) >= d.gpu_milli


@settings(max_examples=60)
@given(clusters(), operations)
def test_free_plus_used_is_capacity_on_the_view_and_the_ledger(specs, ops):
    for columns in (ClusterView(specs), NodeLedger(specs)):
        held: list[tuple[int, Demand]] = []
        for returning, pick, ask in ops:
            if returning and held:
                i, d = held.pop(pick % len(held))
                give_back(columns, i, d)
                if (d.gpu_mask or d.port_ranges) and not _shares_left_cover(held, i, d):
                    # its GPUs / ports are free now: a second return is refused (a share's, unless
                    # other shares still held on its GPU add up to it: the ledger counts milli per GPU)
                    before = columns.amounts(i)
                    try:
                        give_back(columns, i, d)
                    except ResourceError:
                        assert columns.amounts(i) == before
                    else:
                        raise AssertionError(f"{d} given back twice")
            else:
                i = pick % len(specs)
                demand = Demand.of(ask)
                before = columns.amounts(i)
                if isinstance(columns, NodeLedger):
                    try:
                        held.append((i, columns.book(i, demand).demand))
                    except ResourceError:
                        assert shortfall(demand, before) is not None and columns.amounts(i) == before
                else:
                    try:
                        held.append((i, book_exact(columns, i, demand, 0)))
                    except ResourceError:
                        assert shortfall(demand, before) is not None and columns.amounts(i) == before
            assert_free_plus_used_is_capacity(columns, held)


@settings(max_examples=60)
@given(clusters(), st.lists(st.tuples(st.integers(0, 5), view_asks), max_size=6), view_asks,
       st.sampled_from([0, PORT_MIN]))
def test_room_instances_can_be_booked_and_one_more_is_refused(specs, before, ask, port_min):
    demand = Demand.of(ask)
    for columns in (ClusterView(specs), NodeLedger(specs)):
        for pick, other in before:
            try:
                book_exact(columns, pick % len(specs), Demand.of(other), port_min)
            except ResourceError:
                pass
        counts = room(columns, demand, port_min)
        for i in range(len(specs)):
            n = int(counts[i])
            if n == UNBOUNDED:
                assert demand == Demand(0, 0, 0, 0, 0)
                continue
            assert n == room(columns, demand, port_min, rows=np.array([i]))[0]
            for _ in range(n):
                assert shortfall(demand, columns.amounts(i), port_min) is None
                book_exact(columns, i, demand, port_min)
            assert not fits(columns, demand, port_min)[i] and room(columns, demand, port_min)[i] == 0
            assert shortfall(demand, columns.amounts(i), port_min) is not None
            assert exact(columns, i, demand, port_min) is None or _refused(columns, i, demand, port_min)


@settings(max_examples=80)
@given(clusters(), st.lists(st.tuples(st.integers(0, 5), view_asks), max_size=8), view_asks,
       st.sampled_from([0, PORT_MIN]))
def test_fits_agrees_with_room_the_scalar_check_fits_in_and_the_filter(specs, before, ask, port_min):
    view = ClusterView(specs)
    for pick, other in before:
        try:
            book_exact(view, pick % len(specs), Demand.of(other), 0)
        except ResourceError:
            pass
    demand = Demand.of(ask)
    ok = fits(view, demand, port_min)
    assert ok.tolist() == (room(view, demand, port_min) >= 1).tolist()
    assert ok.tolist() == [shortfall(demand, view.amounts(i), port_min) is None for i in range(len(view))]
    never = ~fits(view, demand, port_min, empty=True)
    assert never.tolist() == [shortfall(demand, view.amounts(i, empty=True), port_min) is not None
                              for i in range(len(view))]
    assert not (ok & never).any()
    if port_min == 0 and not ask.gpu_milli:   # a descriptor names whole GPUs only: no milli per GPU to fit a share in
        assert ok.tolist() == [ask.fits_in(view.free(i)) for i in range(len(view))]
    rows = np.arange(len(view))[::-1]
    assert fits(view, demand, port_min, rows=rows).tolist() == ok[rows].tolist()

    ctx = FilterContext(view, SelectionRequest("worker", ask), SelectionSettings(port_min=port_min))
    verdict = ResourceFitFilter().verdict(ctx, np.ones(len(view), bool))
    assert verdict.passed.tolist() == ok.tolist()
    assert sum(r.count for r in verdict.rejections) == int((~ok).sum())
    assert sum(r.count for r in verdict.rejections if r.kind == "filtered") <= int(never.sum())


def _refused(columns: NodeColumns, i: int, demand: Demand, port_min: int) -> bool:
    try:
        book_exact(columns, i, demand, port_min)
    except ResourceError:
        return True
    return False


def _descriptor(d: Demand) -> ResourceDescriptor:
    return ResourceDescriptor(d.memory_mb, d.mvcores / 1000.0, d.gpus, d.gpu_mask, port_ranges=d.port_ranges,
                              gpu_milli=d.gpu_milli)


def _booking(d: Demand) -> Booking:
    return Booking(d.memory_mb, d.mvcores, d.gpu_mask, d.port_ranges, d.gpu_milli)


@settings(max_examples=60)
@given(clusters(), st.lists(st.tuples(st.integers(0, 5), asks), max_size=8))
def test_the_ledger_books_exactly_what_fits_and_tells_what_it_booked(specs, ops):
    """``NodeLedger.book`` books when, and only when, the scalar check says the ask fits;
    a refusal names the reason ``why_not_now`` gives and changes nothing; a booking holds
    the GPUs and ports asked for, and reports them as the resource (the ask's own
    descriptor when the ask named them: its exact booking, the same on every node; an
    equal one built otherwise) and gives back exactly what it booked."""
    ledger = NodeLedger(specs)
    for pick, ask in ops:
        i = pick % len(specs)
        demand = Demand.of(ask)
        before = ledger.amounts(i)
        reason = ledger.why_not_now(i, demand)
        exact = exact_booking(ask, demand)
        try:
            booking = ledger.book(i, demand, exact)
        except ResourceError as exc:
            assert reason is not None and str(exc) == str(reason) and ledger.amounts(i) == before
            continue
        assert reason is None and shortfall(demand, before) is None
        assert popcount(booking.gpu_mask) == demand.gpus and booking.port_ranges.count == demand.ports
        built = ResourceDescriptor(booking.memory_mb, booking.mvcores / 1000.0, popcount(booking.gpu_mask),
                                   booking.gpu_mask, port_ranges=booking.port_ranges)
        assert booking.resource == built
        assert booking.demand == _booking(booking.demand).demand   # the ask's own demand when booked as asked
        named = (ask.gpu_mask or not ask.gpus) and (ask.port_ranges or not ask.ports)
        assert (booking.resource is ask) == bool(named and ask.vcores * 1000 == booking.mvcores)
        assert (booking is exact) == (booking.resource is ask)


@settings(max_examples=40)
@given(clusters(), st.lists(st.tuples(st.integers(0, 5), asks), max_size=8),
       st.lists(st.sampled_from(list(NodeState)), min_size=6, max_size=6))
def test_the_view_read_from_node_reports_is_the_rms_usage_and_health(specs, bookings, states):
    """``view_from_nodes`` sets only the nodes that are used or not usable; the view it
    gives is the one that setting every node's free resources and health from its report
    gives (the reference), row by row, and a placement on it chooses the same."""
    ledger = NodeLedger(specs)
    for pick, ask in bookings:
        try:
            ledger.book(pick % len(specs), Demand.of(ask))
        except ResourceError:
            pass
    reports = [NodeReport(s.host, s.rack, states[i], s.capacity, ledger.free(i)) for i, s in enumerate(specs)]
    view = view_from_nodes(reports)
    reference = ClusterView([r.spec for r in reports])
    for r in reports:
        reference.set_free(r.host, r.free)
        reference.set_health(r.host, r.state.usable)
    for column in ("memory_free", "mvcores_free", "gpus_free", "gpu_free_mask", "ports_free_count", "healthy"):
        assert np.array_equal(getattr(view, column), getattr(reference, column)), column
    assert view.ports_free == reference.ports_free
    pipeline = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
    for ask in (ResourceDescriptor(memory_mb=500, vcores=0.5), ResourceDescriptor(gpus=1, ports=1)):
        chosen = []
        for v in (view, reference):
            try:
                result = pipeline.select(v, SelectionRequest(role="r", resource=ask))
                chosen.append((result.candidates, result.ports))
            except NotAvailable as exc:
                chosen.append(str(exc))
        assert chosen[0] == chosen[1]
