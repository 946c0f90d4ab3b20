"""The RM's reservations pass by pass (tools/rmsim/reservations.py), on a hand-made book: which
gangs hold one under the cluster's bound and the queues' ``reserveAfterSeconds``, a reservation
that moves when the plan changes (a job ends early, a higher-priority gang comes), and the GPUs
a reserved node lends to a job that would outlast the reservation. No AMs: each case is a few
plans of :class:`RMReservations` over a ledger whose running containers are set by hand."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from gangmaster.protocol.rm_protocol import AppState
from gangmaster.tools.rmsim.ledger import NodeLedger
from gangmaster.tools.rmsim.queue_books import QueueBooks
from gangmaster.tools.rmsim.queues import Queue
from gangmaster.tools.rmsim.records import Application
from gangmaster.tools.rmsim.reservations import RMReservations

from sim_cluster import nodes


class Book:
    """Two 4-GPU nodes (n0, n1), reserving queues, and applications running or waiting."""

    def __init__(self, queues=("a",), cluster_reservations: int = 1, reserve_after_s: float = 0.0):
        self.now = 0.0
        self.ledger = NodeLedger(nodes(2))
        self.queues = [Queue(name, policy="reserve", cluster_reservations=cluster_reservations,
                             reserve_after_s=reserve_after_s) for name in queues]
        self.books = QueueBooks(self.ledger, self.queues)
        self.apps: dict[str, Application] = {}
        self.book = RMReservations(self.ledger, self.books, self.apps, lambda: self.now)

    def app(self, name: str, expected_s: float, gang=(), queue: str = "a", priority: int = 0) -> Application:
        seq = len(self.apps) + 1
        app = Application(f"app_{seq:04d}", seq, name, queue, self.now, 1, False, None, priority,
                          expected_s=expected_s)
        app.gang = tuple(gang)   # the planner's instances, as a declared gang's roles give them
        app.state = AppState.RUNNING
        self.apps[app.app_id] = app
        self.books.queues[queue].apps[app.app_id] = app
        return app

    def running(self, name: str, expected_s: float, node: int, gpus: int) -> Application:
        """An application granted ``gpus`` GPUs of node ``node`` now, declared to run ``expected_s``."""
        app = self.app(name, expected_s)
        record = SimpleNamespace(booking=SimpleNamespace(held=(0, 0, gpus)), node=node, started_at=self.now,
                                 allocated_at=self.now)
        app.containers[f"c_{name}"] = record
        app.container_ids.append(f"c_{name}")
        self.ledger.gpus_free[node] -= gpus
        return app

    def ends(self, app: Application) -> None:
        for record in app.containers.values():
            self.ledger.gpus_free[record.node] += record.booking.held[2]
        app.containers.clear()
        app.state = AppState.FINISHED

    def held(self) -> dict[str, tuple[float, dict[str, int]]]:
        self.book.plan()
        return {self.apps[owner].name: (r.start_s, dict(r.gpus_by_host)) for owner, r in self.book.held}


def gang(*gpus: int) -> list[tuple[int, str, None]]:
    return [(g, "worker", None) for g in gpus]


def test_a_reservation_moves_earlier_when_a_job_ends_before_its_declared_end():
    b = Book()
    b.running("first", 60, node=0, gpus=4)
    second = b.running("second", 100, node=1, gpus=4)
    b.app("big", 30, gang(4, 4))
    b.now = 10.0
    assert b.held() == {"big": (100.0, {"n0": 4, "n1": 4})}
    b.ends(second)   # 90 s before its declared end: the next pass plans the gang at the first's end
    assert b.held() == {"big": (60.0, {"n0": 4, "n1": 4})}


def test_a_reservation_moves_to_a_higher_priority_gang_that_comes():
    b = Book()
    b.running("first", 60, node=0, gpus=4)
    b.running("second", 100, node=1, gpus=4)
    b.app("big", 30, gang(4, 4))
    assert set(b.held()) == {"big"}
    b.now = 5.0
    b.app("urgent", 30, gang(4), priority=10)
    assert b.held() == {"urgent": (60.0, {"n0": 4})}   # the bound (1) is the urgent gang's now


@pytest.mark.parametrize("cluster_reservations, holders", [(1, {"older"}), (2, {"older", "younger"})])
def test_the_cluster_bound_leaves_reservations_to_the_oldest_gangs_of_all_reserving_queues(cluster_reservations,
                                                                                           holders):
    b = Book(queues=("a", "b"), cluster_reservations=cluster_reservations)
    b.running("first", 60, node=0, gpus=4)
    b.running("second", 100, node=1, gpus=4)
    b.app("older", 30, gang(4), queue="b")
    b.app("younger", 30, gang(4), queue="a")
    assert set(b.held()) == holders


@pytest.mark.parametrize("waited_s, holders", [(59.0, set()), (60.0, {"big"})])
def test_a_gang_reserves_once_it_waited_reserve_after_seconds(waited_s, holders):
    b = Book(reserve_after_s=60.0)
    b.running("first", 600, node=0, gpus=4)
    b.app("big", 30, gang(4, 4))
    b.now = waited_s
    assert set(b.held()) == holders


@pytest.mark.parametrize("gpus, lent", [(1, True), (2, True), (3, False)])
def test_a_reserved_node_lends_what_the_gang_will_not_need_there(gpus, lent):
    """n0 is busy until 60 s; the 6-GPU gang reserves n0 whole and 2 GPUs of n1 from then. A job
    declared to run 100 s outlasts the reservation: n1 still lends it the 2 GPUs the gang leaves."""
    b = Book()
    b.running("first", 60, node=0, gpus=4)
    b.app("big", 30, gang(4, 2))
    late = b.app("late", 100, gang(1))
    assert b.held()["big"] == (60.0, {"n0": 4, "n1": 2})
    assert b.book.lends(late, 1, gpus) is lent
    assert b.book.lends(late, 0, 1) is False
