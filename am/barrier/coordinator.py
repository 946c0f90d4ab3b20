"""The barrier coordinator core: arrivals, epochs, release, timeouts — no gRPC.

One :class:`_Attempt` per barrier (job, gang, attempt), each versioned by an
epoch, behind one lock (as Spark's ``BarrierCoordinator``). Every task's n-th
call (``barrier()`` or ``all_gather()``) is its epoch n; when all N tasks of the
attempt have arrived at the coordinator's epoch, every waiter is released and the
epoch moves on.

The core never sleeps and never reads the wall clock on its own: time comes from
an injectable :class:`Clock`, and deadlines are checked when the owner calls
:meth:`BarrierCoordinator.expire` (the gRPC server schedules that for
:meth:`~BarrierCoordinator.next_deadline`; tests move a :class:`ManualClock`).

A waiter is a callback. :meth:`~BarrierCoordinator.arrive` either raises a
:class:`~gangmaster.am.barrier.errors.BarrierError` at once (stale attempt, past
epoch, wrong token …) or returns a :class:`Waiter` whose callback is called
exactly once with a :class:`Released` or a ``BarrierError`` — possibly before
``arrive`` returns, when this arrival completed the barrier. Callbacks are called
outside the lock, so they may call back into the coordinator. A simulated task's
``barrier()`` call comes through :meth:`~BarrierCoordinator.call_barrier`, which is
``arrive`` but answers a call that releases its epoch alone (a gang of one task's) by
returning its :class:`Released`, with no waiter and no callback.

Arrivals are idempotent, keyed by (task, epoch): a task that re-sends its call
(its connection dropped, or the server answered "still waiting") is not counted
twice, and a re-send for the epoch just released gets that release again.

What a long-running AM's coordinator keeps is bounded: an attempt's state is dropped
when it ends (closed, superseded or failed); only its token and why it ended stay, in a
history of the last ``history`` ended attempts, so a late ("zombie") call still hears
that its attempt ended. Every call is authenticated first — against the token of the
attempt it names — and a call that fails that learns nothing else; refusals are
counted, and logged at most once per ``refusal_log_interval_s``. While a new AM takes
its gangs over from a previous one (:meth:`~BarrierCoordinator.taking_over`), a call
naming an attempt not reopened yet is not refused but told to come back
(:class:`NotOpenYet`): the previous AM's tasks may call before the new AM reopens
their barriers, and a refusal would end them. An all_gather's
messages may total at most ``max_message_bytes`` (counting :data:`FRAMING_BYTES` per
message): past it the gather fails at once for every task. Example::

    coord = BarrierCoordinator(clock=ManualClock())
    token = coord.open_attempt("job", "gang", 1, [TaskInfo(0, "h0"), TaskInfo(1, "h1")])
    results = []
    coord.arrive(Arrival("job", "gang", 1, token, task=0, epoch=0), results.append)
    coord.arrive(Arrival("job", "gang", 1, token, task=1, epoch=0), results.append)
    assert [r.epoch for r in results] == [0, 0]
"""
from __future__ import annotations

import heapq
import functools
import hmac
import itertools
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, NamedTuple, Protocol, Sequence

from gangmaster.am.barrier.errors import (AttemptFailed, BarrierAuthError, BarrierError, BarrierId,
                                          BarrierInvalid, BarrierMismatch, BarrierTimeout,
                                          MessageTooLarge, StaleAttempt, StaleEpoch)
from gangmaster.protocol.refusal_log import RefusalLog
from gangmaster.selectors.values import value
from gangmaster.conf.limits import (BARRIER_ENDED_ATTEMPTS_KEPT, BARRIER_MAX_MESSAGE_BYTES,
                                    REFUSAL_LOG_INTERVAL_S)

__all__ = ["BarrierCoordinator", "NotOpenYet", "TaskInfo", "Arrival", "HostArrival", "Released", "Progress", "Waiter",
           "CoordinatorStatistics", "Clock", "MonotonicClock", "ManualClock", "BARRIER", "ALL_GATHER",
           "YEAR_S", "FRAMING_BYTES"]

log = logging.getLogger("gangmaster.barrier")

#: Default barrier timeout: a year, i.e. effectively unlimited (as Spark's default).
YEAR_S = 365 * 24 * 3600.0

BARRIER = "barrier"
ALL_GATHER = "all_gather"
OPERATIONS = (BARRIER, ALL_GATHER)

#: What one message adds to an all_gather's size beyond its bytes: its field tag and
#: length in the gathered reply (at most 6 bytes on the wire; 8 keeps a margin).
FRAMING_BYTES = 8


class Clock(Protocol):
    """Where the coordinator gets the time: seconds, monotonic."""

    def now(self) -> float: ...


class MonotonicClock:
    """The real clock (``time.monotonic``, the same clock asyncio's loop uses)."""

    def now(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to: tests and virtual-time runs."""

    def __init__(self, start: float = 0.0):
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        self._now += seconds


class TaskInfo(NamedTuple):
    """Where a task of the gang runs: its gang-wide index (rank), host and named ports
    (read only), its role and its index in the role. A named tuple: the AM makes one per
    task it launches, from the task's fields, without a Python call (``new_task_info``)."""

    index: int
    host: str
    ports: Mapping[str, int] = MappingProxyType({})
    role: str = ""
    role_index: int = 0


#: A :class:`TaskInfo` from its five fields in order, as one tuple (no argument handling).
new_task_info = functools.partial(tuple.__new__, TaskInfo)


@value
class Arrival:
    """One call of ``barrier()`` / ``all_gather()`` by one task. ``unsent_size`` is the
    size of an all_gather message the task did not send because it is over the limit
    (``message`` is then empty): the coordinator fails the gather for every task."""

    job: str
    gang: str
    attempt: int
    token: str
    task: int
    epoch: int
    operation: str = BARRIER
    message: bytes = b""
    unsent_size: int = 0

    @property
    def barrier(self) -> BarrierId:
        return BarrierId(self.job, self.gang, self.attempt)


@dataclass(frozen=True, slots=True)
class Released:
    """What a released waiter gets: the epoch, and for all_gather every task's message by index.

    ``reply``: the release as a server sends it, encoded once for all its waiters by that
    server (:func:`gangmaster.am.barrier.server.released_reply`) and owned by the release:
    it lives exactly as long as the release does (the attempt keeps its last release until
    its next one or its end; a waiter, until it is answered), no longer."""

    epoch: int
    operation: str
    messages: tuple[bytes, ...] = ()
    reply: list = field(default_factory=list, compare=False, repr=False)


#: The release of a barrier (not an all_gather: no messages) at each of the first epochs: one
#: object per epoch, shared by every attempt (most attempts are released once, at epoch 0).
_BARRIER_RELEASES = {epoch: Released(epoch, BARRIER) for epoch in range(64)}


@dataclass(frozen=True)
class Progress:
    """How far the current epoch of one attempt is (for "still waiting" logs and replies)."""

    barrier: BarrierId
    epoch: int
    arrived: int
    total: int
    waiting_s: float
    missing: tuple[int, ...]


@dataclass
class CoordinatorStatistics:
    """Counters since the coordinator was made, and gauges of what it holds now: attempts
    open, calls waiting, ended attempts remembered (at most its ``history``), gangs known."""

    attempts_open: int = 0
    calls_waiting: int = 0
    attempts_remembered: int = 0
    gangs_known: int = 0
    arrivals: int = 0
    duplicate_arrivals: int = 0
    releases: int = 0
    timeouts: int = 0
    mismatches: int = 0
    stale_requests: int = 0
    auth_refusals: int = 0
    invalid_requests: int = 0
    attempts_failed: int = 0
    too_large: int = 0
    #: barrier calls received: a task's own call, or one message speaking for the tasks of a
    #: host (:meth:`BarrierCoordinator.arrive_host`); ``host_calls`` counts the latter
    calls: int = 0
    host_calls: int = 0
    leaders_lost: int = 0


#: A waiter's callback: called once with a :class:`Released` or a ``BarrierError``.
Callback = Callable[[object], None]


class HostArrival(NamedTuple):
    """One task's call as its host's leader reports it (:meth:`BarrierCoordinator.arrive_host`):
    the fields of its :class:`Arrival` that are its own."""

    task: int
    operation: str = BARRIER
    message: bytes = b""
    unsent_size: int = 0


class Waiter:
    """One waiting call. Its callback gets exactly one outcome; ``withdraw`` drops it
    (the call went away) without undoing the task's arrival. ``tasks``: how many tasks'
    calls it stands for (a host leader's message, several; counted in ``calls_waiting``
    and in what failing, closing and timing out an attempt return)."""

    __slots__ = ("attempt", "task", "epoch", "callback", "done")
    tasks = 1

    def __init__(self, attempt: "_Attempt", task: int, epoch: int, callback: Callback):
        self.attempt = attempt
        self.task = task
        self.epoch = epoch
        self.callback = callback
        self.done = False

    @property
    def barrier(self) -> BarrierId:
        """The barrier of the call."""
        return self.attempt.barrier


class _Attempt:
    """The state of one barrier: the current epoch's arrivals and waiters. What every
    attempt starts with alike is a class default, set on the attempt once it changes
    (a replay opens tens of thousands, most released once and closed)."""

    epoch = 0
    operation: str | None = None
    started_at: float | None = None
    gathered_bytes = 0  # the current epoch's all_gather messages, framing included
    last_release: Released | None = None
    broken: BarrierError | None = None

    def __init__(self, key: tuple[str, str], ended_key: tuple[str, str, int], tasks: tuple[TaskInfo, ...],
                 token: str, timeout_s: float):
        self.key = key               # (job, gang): the coordinator's open attempts are kept by it
        self.ended_key = ended_key   # (job, gang, attempt): its ended ones by this
        self.attempt = ended_key[2]
        self.tasks = tasks
        self.total = len(tasks)
        self.token = token
        self.timeout_s = timeout_s
        self.arrivals: dict[int, bytes] = {}
        self.waiters: dict[int, list[Waiter]] = {}

    @property
    def barrier(self) -> BarrierId:
        """Its name, for errors and logs (made when one needs it: most attempts never do)."""
        return BarrierId(*self.ended_key)

    def deadline(self) -> float | None:
        if self.started_at is None or self.broken is not None:
            return None
        return self.started_at + self.timeout_s

    def missing(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.total) if i not in self.arrivals)

    def take_waiters(self) -> list[Waiter]:
        """Every waiter not yet told, marked done (the caller tells them)."""
        out = [w for ws in self.waiters.values() for w in ws if not w.done]
        self.waiters = {}
        for w in out:
            w.done = True
        return out

    def fail(self, err: BarrierError, callback: Callback) -> list:
        """Break the attempt with ``err``: every waiter and the caller get it now, and
        every later call of the attempt gets it too (the gang must restart)."""
        self.broken = err
        return [(w.callback, err) for w in self.take_waiters()] + [(callback, err)]


#: What is remembered of an ended attempt, enough to authenticate and answer a late call
#: (its error is built only if such a call comes: most attempts end with nobody waiting):
#: ``(token, how, arrived, total, failure)`` — how it ended ("finished", "superseded",
#: "failed"), how many of how many tasks had arrived at the epoch it ended in, and for a
#: failed attempt what its waiters were told (AttemptFailed's message), else None.
_Ended = tuple[str, str, int, int, "str | None"]


class NotOpenYet(Exception):
    """A call naming an attempt this coordinator does not know, while its AM is still
    taking over from a previous one (:meth:`BarrierCoordinator.taking_over`): the attempt
    may be reopened in a moment, so the call is to be re-sent (the server answers it
    UNAVAILABLE, which a task retries), not refused. Not a :class:`BarrierError`: no
    task ever hears it as an answer."""


class BarrierCoordinator:
    """Barriers keyed by (job, gang, attempt). Thread-safe; see the module docstring.

    ``max_message_bytes``, ``history`` and ``refusal_log_interval_s`` default to the
    documented limits (gangmaster.conf.limits). ``new_token`` makes the token of an
    attempt opened without one (by default 24 random bytes, URL-safe)."""

    def __init__(self, clock: Clock | None = None, default_timeout_s: float = YEAR_S,
                 max_message_bytes: int = BARRIER_MAX_MESSAGE_BYTES,
                 history: int = BARRIER_ENDED_ATTEMPTS_KEPT,
                 refusal_log_interval_s: float = REFUSAL_LOG_INTERVAL_S,
                 new_token: Callable[[], str] = functools.partial(secrets.token_urlsafe, 24)):
        self.clock = clock or MonotonicClock()
        self._new_token = new_token
        self.default_timeout_s = default_timeout_s
        self.max_message_bytes = max_message_bytes
        self.history = history
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str], _Attempt] = {}   # (job, gang) -> its open attempt
        #: (job, gang, attempt) -> how it ended, oldest first: the order they are forgotten in
        self._ended: OrderedDict[tuple[str, str, int], _Ended] = OrderedDict()
        self._refusals = RefusalLog(log, "a wrong token, or an attempt the coordinator does not know",
                                    refusal_log_interval_s, clock=self.clock.now)
        self._stats = CoordinatorStatistics()
        #: (deadline, seq, attempt) of every epoch started, earliest first; an entry whose
        #: attempt is no longer current, or whose epoch ended, is dropped when it comes up,
        #: so the next deadline costs no scan of every open barrier (thousands in a replay).
        self._deadlines: list[tuple[float, int, _Attempt]] = []
        self._deadline_seq = itertools.count()
        self._taking_over = False

    def taking_over(self, still: bool = True) -> None:
        """Whether this coordinator's AM is ``still`` taking its gangs over from a previous
        AM (a journal: YARN's next AM attempt, a Slurm rerun). Meanwhile a call naming an
        attempt not open here raises :class:`NotOpenYet` instead of being refused: the
        previous AM's tasks dial the same port and may call before their barrier is
        reopened. The driver says so before the coordinator listens, and ends it once its
        AMs have reopened what they recovered; from then on such calls are refused."""
        with self._lock:
            self._taking_over = still

    # ----------------------------------------------------------- the AM's side
    def open_attempt(self, job: str, gang: str, attempt: int, tasks: Sequence[TaskInfo],
                     token: str | None = None, timeout_s: float | None = None) -> str:
        """Open a barrier for ``attempt`` of the gang and return its secret token.

        ``tasks`` are the gang's tasks by index (``tasks[i].index == i``). An older
        open attempt of the same gang is superseded: its waiters fail at once."""
        tasks = tuple(tasks)
        if len(tasks) != 1 or tasks[0].index:   # (one task, at index 0: most gangs, in order)
            _check_ranks(job, gang, attempt, tasks)
        timeout_s = self.default_timeout_s if timeout_s is None else float(timeout_s)
        if not timeout_s > 0:
            raise ValueError(f"{job}/{gang} attempt {attempt}: timeout must be > 0 s, got {timeout_s}")
        token = token or self._new_token()
        attempt = int(attempt)
        key, ended_key = (job, gang), (job, gang, attempt)
        with self._lock:
            old = self._open.get(key)
            if (old is not None and old.attempt == attempt) or ended_key in self._ended:
                raise ValueError(f"{BarrierId(*ended_key)} was already opened; a restarted gang needs a new "
                                 "attempt number")
            calls = self._supersede(old, attempt) if old is not None else None
            self._open[key] = _Attempt(key, ended_key, tasks, token, timeout_s)
        if calls:
            _deliver(calls)
        log.info("%s: barrier opened for %d tasks (timeout %.0f s)", BarrierId(*ended_key), len(tasks), timeout_s)
        return token

    def _supersede(self, old: _Attempt, attempt: int) -> list:
        """End ``old``, the gang's open attempt, as ``attempt`` opens (lock held): the calls
        that tell its waiters (they fail). ``ValueError`` when ``old`` is the newer."""
        if old.attempt > attempt:
            raise ValueError(f"{BarrierId(*old.key, attempt)}: attempt {old.attempt} is already open; attempt "
                             "numbers must grow")
        waiters = self._end(old, "superseded")
        if not waiters:
            return []
        err = StaleAttempt(f"{old.barrier} was superseded by attempt {attempt} (at epoch {old.epoch})",
                           old.barrier, old.epoch, len(old.arrivals), old.total, old.missing())
        return [(w.callback, err) for w in waiters]

    def fail_attempt(self, job: str, gang: str, attempt: int, reason: str, by: str = "the AM") -> int:
        """Fail every waiter of the attempt at once with :class:`AttemptFailed` (the AM is
        restarting the gang); later calls of that attempt get the same error. Returns
        how many calls were waiting. Failing an attempt that is not open is a no-op."""
        with self._lock:
            a = self._open.get((job, gang))
            if a is None or a.attempt != attempt:
                return 0
            err = AttemptFailed(f"{a.barrier} was failed by {by} at epoch {a.epoch} "
                                f"({len(a.arrivals)}/{a.total} arrived): {reason}",
                                a.barrier, a.epoch, len(a.arrivals), a.total, a.missing())
            waiters = self._end(a, "failed", err.message)
            self._stats.attempts_failed += 1
        _deliver([(w.callback, err) for w in waiters])
        log.warning("%s", err)
        return _tasks_of(waiters)

    def close_attempt(self, job: str, gang: str, attempt: int) -> int:
        """The attempt finished: forget its state; later calls get :class:`StaleAttempt`.
        Returns how many calls were still waiting (they fail)."""
        with self._lock:
            a = self._open.get((job, gang))
            if a is None or a.attempt != attempt:
                return 0
            waiters = self._end(a, "finished")
            if not waiters:
                return 0
            err = StaleAttempt(f"{a.barrier} is finished (closed at epoch {a.epoch})",
                               a.barrier, a.epoch, len(a.arrivals), a.total, a.missing())
        _deliver([(w.callback, err) for w in waiters])
        return _tasks_of(waiters)

    def _end(self, a: _Attempt, how: str, failure: str | None = None) -> list[Waiter]:
        """Drop the attempt's state, remember why it ended (forgetting the oldest ended
        attempt past ``history``), and return its waiters (the caller tells them why). What
        it gathered goes with it: its last release (and the reply a server made of it) and
        the current epoch's messages (an entry of the deadline heap may still name the
        attempt until it comes to the top)."""
        del self._open[a.key]
        a.last_release = None
        if a.gathered_bytes:
            a.arrivals = dict.fromkeys(a.arrivals, b"")
        if a.started_at is not None:   # an epoch was running: its deadline goes
            self._deadlines_moved()
        ended = self._ended
        ended[a.ended_key] = (a.token, how, len(a.arrivals), a.total, failure)
        if len(ended) > self.history:
            ended.popitem(last=False)
        return a.take_waiters() if a.waiters else []

    def attempt_tasks(self, job: str, gang: str, attempt: int) -> tuple[str, tuple[TaskInfo, ...]]:
        """The token and tasks of an open attempt (what its tasks' environment needs);
        ``KeyError`` when that attempt is not open."""
        with self._lock:
            a = self._open.get((job, gang))
            if a is None or a.attempt != attempt:
                raise KeyError(f"{job}/{gang} attempt {attempt} is not open on this coordinator")
            return a.token, a.tasks

    # ---------------------------------------------------------- the tasks' side
    def arrive(self, arrival: Arrival, callback: Callback) -> Waiter:
        """Record a task's arrival at an epoch; see the module docstring."""
        with self._lock:
            self._stats.calls += 1
            a = self._check(arrival.job, arrival.gang, arrival.attempt, arrival.token, arrival.task,
                            arrival.epoch)
            waiter, calls = self._arrive(a, arrival, callback)
        for told, outcome in calls:   # outside the lock (_deliver)
            told(outcome)
        return waiter

    def call_barrier(self, job: str, gang: str, attempt: int, token: str, task: int, epoch: int,
                     callback: Callback) -> "Waiter | Released":
        """A task's ``barrier()`` call at ``epoch``: :meth:`arrive` of that :class:`Arrival`,
        but when the call releases its epoch alone (the task of a gang of one, at its current
        epoch: most gangs) it returns the :class:`Released` itself and its callback is never
        called; every other call gets :meth:`arrive`'s waiter. It raises what :meth:`arrive`
        raises (tests/property/test_barrier_release.py holds the two to each other)."""
        with self._lock:
            self._stats.calls += 1
            a = self._open.get((job, gang))
            if (a is not None and a.total == 1 and a.attempt == attempt and epoch == a.epoch and task == 0
                    and a.broken is None and _same_token(a.token, token)):   # what _check passes, alone
                # nobody else can mismatch it or wait, no deadline ever runs, nothing of the epoch is
                # kept: it is released (as _record and _release would) and the attempt moves on
                self._stats.arrivals += 1
                if log.isEnabledFor(logging.INFO):
                    log.info("%s barrier epoch %d: task %d arrived (1/1)", a.barrier, epoch, task)
                return self._release(a, _BARRIER_RELEASES.get(epoch) or Released(epoch, BARRIER))
            a = self._check(job, gang, attempt, token, task, epoch)
            waiter, calls = self._arrive(a, Arrival(job, gang, attempt, token, task, epoch), callback)
        for told, outcome in calls:   # outside the lock (_deliver)
            told(outcome)
        return waiter

    def arrive_host(self, job: str, gang: str, attempt: int, token: str, leader: int, epoch: int,
                    arrivals: Sequence["HostArrival | tuple[int, str, bytes, int]"],
                    callback: Callback) -> Waiter:
        """One message speaking for several tasks of one host (their leader's, ``leader``): each
        of ``arrivals`` is recorded at ``epoch`` as that task's own :meth:`arrive` would record
        it (idempotent, checked, mismatches and over-large gathers break the attempt), and the
        message waits as one call: ``callback`` is told once, with the release or the error
        every waiter of the epoch gets. ``arrivals`` may be empty (the leader waits again for an
        epoch it already reported). Checked like a call of task ``leader``; a task index outside
        the gang is :class:`BarrierInvalid`."""
        with self._lock:
            self._stats.calls += 1
            self._stats.host_calls += 1
            a = self._check(job, gang, attempt, token, leader, epoch)
            for host_arrival in arrivals:
                if not 0 <= host_arrival[0] < a.total:
                    self._stats.invalid_requests += 1
                    raise BarrierInvalid(f"{a.barrier}: task index {host_arrival[0]} (sent by task {leader}'s "
                                         f"host) is outside 0..{a.total - 1}", a.barrier, epoch)
            calls: list = []
            if epoch == a.epoch:
                for task, operation, message, unsent_size in arrivals:
                    if operation not in OPERATIONS:
                        self._stats.invalid_requests += 1
                        raise BarrierInvalid(f"{a.barrier}: unknown operation {operation!r}; "
                                             f"expected one of {', '.join(OPERATIONS)}", a.barrier, epoch)
                    _, calls = self._record(a, Arrival(job, gang, attempt, token, task, epoch, operation, message,
                                                       unsent_size), callback, wait=False)
                    if calls:   # released or broken: the callback is among the calls
                        break
                if not calls:
                    waiter = _HostWaiter(a, leader, epoch, callback)
                    waiter.tasks = max(1, len(arrivals))
                    a.waiters.setdefault(leader, []).append(waiter)
                    return waiter
                waiter = Waiter(a, leader, epoch, callback)
                waiter.done = True
            else:   # the epoch just released (a re-sent message), or a stale one: as a task's call
                operation = arrivals[0][1] if arrivals else (
                    a.last_release.operation if a.last_release is not None else BARRIER)
                waiter, calls = self._arrive(a, Arrival(job, gang, attempt, token, leader, epoch, operation),
                                             callback)
        _deliver(calls)
        return waiter

    def leader_lost(self, job: str, gang: str, attempt: int, token: str, task: int, epoch: int,
                    leader: int) -> None:
        """Task ``task`` lost its host's barrier leader, task ``leader`` (its process ended, or
        it left the barrier) while it needed it: the leader can no longer arrive, so the
        attempt fails at once, naming it, as when the AM fails it for a task that died.
        Checked like a call of ``task``."""
        with self._lock:
            self._stats.calls += 1
            a = self._check(job, gang, attempt, token, task, epoch)
            if not 0 <= leader < a.total:
                self._stats.invalid_requests += 1
                raise BarrierInvalid(f"{a.barrier}: task {task} names task {leader} as its host's leader, "
                                     f"outside 0..{a.total - 1}", a.barrier, epoch)
            self._stats.leaders_lost += 1
            reason = (f"task {leader} (host {a.tasks[leader].host}), the barrier leader of its host, went "
                      f"away while task {task} waited for it at epoch {epoch}")
        self.fail_attempt(job, gang, attempt, reason, by="a task")

    def _arrive(self, a: _Attempt, arrival: Arrival, callback: Callback) -> tuple[Waiter, list]:
        """The arrival of a call that passed :meth:`_check` (lock held): its waiter, and the
        calls to make once the lock is released (each tells a waiter its outcome)."""
        if arrival.operation not in OPERATIONS:
            self._stats.invalid_requests += 1
            raise BarrierInvalid(f"{a.barrier}: unknown operation {arrival.operation!r}; "
                                 f"expected one of {', '.join(OPERATIONS)}", a.barrier, arrival.epoch)
        if arrival.epoch == a.epoch:   # most calls
            return self._record(a, arrival, callback)
        if arrival.epoch == a.epoch - 1 and a.last_release is not None:
            # A re-send of the epoch just released (its reply was lost): release again.
            self._stats.duplicate_arrivals += 1
            if a.last_release.operation != arrival.operation:
                raise self._mismatch_error(a, arrival, a.last_release.operation, range(a.total))
            waiter = Waiter(a, arrival.task, arrival.epoch, callback)
            waiter.done = True
            return waiter, [(callback, a.last_release)]
        self._stats.stale_requests += 1
        where = "has moved past" if arrival.epoch < a.epoch else "has not reached"
        raise StaleEpoch(f"{a.barrier}: task {arrival.task} called at epoch {arrival.epoch}, which "
                         f"the coordinator {where} (current epoch {a.epoch})",
                         a.barrier, arrival.epoch, len(a.arrivals), a.total, a.missing())

    def _record(self, a: _Attempt, arrival: Arrival, callback: Callback,
                wait: bool = True) -> tuple[Waiter, list]:
        """Record one arrival at the current epoch: its waiter, and the calls to make. With
        ``wait`` false (one of a host's arrivals) no waiter is kept for it; ``callback`` is
        still told when this arrival releases or breaks the epoch."""
        task, operation = arrival.task, arrival.operation
        waiter = Waiter(a, task, arrival.epoch, callback)
        arrivals = a.arrivals
        if a.operation is not None and a.operation != operation:
            calls = a.fail(self._mismatch_error(a, arrival, a.operation, sorted(arrivals)), callback)
            self._deadlines_moved()
            return waiter, calls
        if task in arrivals:
            self._stats.duplicate_arrivals += 1
            if wait:
                a.waiters.setdefault(task, []).append(waiter)
            return waiter, []
        message = b""
        if operation == ALL_GATHER:
            size = max(len(arrival.message), arrival.unsent_size) + FRAMING_BYTES
            if arrival.unsent_size or a.gathered_bytes + size > self.max_message_bytes:
                calls = a.fail(self._too_large_error(a, arrival, size), callback)
                self._deadlines_moved()
                return waiter, calls
            a.gathered_bytes += size
            message = arrival.message
        self._stats.arrivals += 1
        n = len(arrivals) + 1
        if log.isEnabledFor(logging.INFO):
            log.info("%s barrier epoch %d: task %d arrived (%d/%d)", a.barrier, a.epoch, task, n, a.total)
        if n < a.total:
            if n == 1:   # the epoch starts: its deadline runs from now
                a.operation = operation
                a.started_at = self.clock.now()
                heapq.heappush(self._deadlines, (a.deadline(), next(self._deadline_seq), a))
                self._deadlines_moved()
            arrivals[task] = message
            if wait:
                a.waiters.setdefault(task, []).append(waiter)
            return waiter, []
        # The last arrival releases the epoch: the waiting tasks in the order they came, then this one.
        epoch = a.epoch
        if operation == ALL_GATHER:
            arrivals[task] = message
            release = Released(epoch, operation, tuple([arrivals[i] for i in range(a.total)]))
            a.gathered_bytes = 0
        else:
            release = _BARRIER_RELEASES.get(epoch) or Released(epoch, operation)
        waiter.done = True
        self._release(a, release)
        if n == 1:   # a gang of one task: nobody else waits
            if arrivals:
                a.arrivals = {}
            return waiter, [(callback, release)]
        a.operation, a.arrivals, a.started_at = None, {}, None
        self._deadlines_moved()   # its deadline was running
        waiters = a.take_waiters() if a.waiters else None
        if not waiters:   # nobody else waits any more
            return waiter, [(callback, release)]
        return waiter, [(w.callback, release) for w in waiters] + [(callback, release)]

    def _release(self, a: _Attempt, release: Released) -> Released:
        """The attempt's epoch is released (``release``; the caller tells the last arrival's
        waiter): the attempt moves to its next epoch."""
        a.last_release = release
        a.epoch += 1
        self._stats.releases += 1
        return release

    def _too_large_error(self, a: _Attempt, arrival: Arrival, size: int) -> MessageTooLarge:
        self._stats.too_large += 1
        total = a.gathered_bytes + size
        return MessageTooLarge(
            f"{a.barrier} all_gather epoch {a.epoch}: task {arrival.task}'s message ({size:,} bytes) brings "
            f"the gathered messages to {total:,} bytes, over the limit of {self.max_message_bytes:,} bytes "
            f"(barrier.max_message_bytes; each message counts {FRAMING_BYTES} bytes of framing)",
            a.barrier, a.epoch, len(a.arrivals), a.total, a.missing())

    def _mismatch_error(self, a: _Attempt, arrival: Arrival, expected: str,
                        others: Iterable[int]) -> BarrierMismatch:
        self._stats.mismatches += 1
        others = list(others)
        shown = ", ".join(map(str, others[:20])) + (" …" if len(others) > 20 else "")
        return BarrierMismatch(
            f"{a.barrier} epoch {arrival.epoch}: task {arrival.task} called {arrival.operation} but "
            f"task(s) {shown} called {expected} at the same epoch; every task must make the same "
            f"calls in the same order", a.barrier, arrival.epoch, len(a.arrivals), a.total, a.missing())

    def withdraw(self, waiter: Waiter) -> None:
        """The call behind ``waiter`` went away (cancelled, or answered "still waiting").
        The task's arrival stays recorded: its next call for the epoch re-attaches."""
        with self._lock:
            if waiter.done:
                return
            waiter.done = True
            a = waiter.attempt
            if self._open.get(a.key) is a:
                ws = a.waiters.get(waiter.task)
                if ws and waiter in ws:
                    ws.remove(waiter)
                    if not ws:
                        del a.waiters[waiter.task]

    def task_infos(self, job: str, gang: str, attempt: int, token: str, task: int) -> tuple[TaskInfo, ...]:
        """Every task's address, by index (for rank 0's MPI host file)."""
        with self._lock:
            a = self._check(job, gang, attempt, token, task, None)
            return a.tasks

    def progress(self, job: str, gang: str, attempt: int, token: str, task: int) -> Progress:
        """How far the attempt's current epoch is (checked like a call)."""
        with self._lock:
            a = self._check(job, gang, attempt, token, task, None)
            return self._progress(a)

    def _progress(self, a: _Attempt) -> Progress:
        waiting = 0.0 if a.started_at is None else self.clock.now() - a.started_at
        return Progress(a.barrier, a.epoch, len(a.arrivals), a.total, waiting, a.missing())

    def _check(self, job: str, gang: str, attempt: int, token: str, task: int,
               epoch: int | None) -> _Attempt:
        """The open attempt a call names, or the error that call gets. Caller holds the lock.

        Authentication comes first: a call without the token of the attempt it names (or
        naming an attempt not known, or forgotten) is refused and told nothing else; but
        while the AM is :meth:`taking_over`, one naming an attempt not known is told to come
        back (:class:`NotOpenYet`)."""
        a = self._open.get((job, gang))
        if a is None or a.attempt != attempt:   # not the open attempt: refused, or told how it ended
            if self._taking_over and (job, gang, attempt) not in self._ended:
                raise NotOpenYet(f"{_cut(f'{job}/{gang} attempt {attempt}')} is not open (yet): the AM is "
                                 "taking its gangs over from the previous one")
            self._ended_check(a, job, gang, attempt, token, task, epoch)
        if not _same_token(a.token, token):
            self._refuse(job, gang, attempt, task, epoch)
        if not 0 <= task < a.total:
            self._stats.invalid_requests += 1
            raise BarrierInvalid(f"{a.barrier}: task index {task} is outside 0..{a.total - 1}", a.barrier, epoch)
        if a.broken is not None:
            b = a.broken
            raise type(b)(b.message, b.barrier, b.epoch, b.arrived, b.total, b.missing)
        return a

    def _ended_check(self, a: _Attempt | None, job: str, gang: str, attempt: int, token: str, task: int,
                     epoch: int | None) -> None:
        """:meth:`_check` of a call naming an attempt that is not open (``a``: the gang's open
        one, if any): it raises, refused unless the attempt ended and the call has its token."""
        ended = self._ended.get((job, gang, attempt))
        if ended is None or not _same_token(ended[0], token):
            self._refuse(job, gang, attempt, task, epoch)
        barrier = BarrierId(job, gang, attempt)
        self._stats.stale_requests += 1
        _token, how, arrived, total, failure = ended
        if failure is not None:
            raise AttemptFailed(failure, barrier, epoch, arrived, total)
        newer = f"; the open attempt is {a.attempt}" if a is not None else ""
        raise StaleAttempt(f"{barrier} is {how}{newer}; {_call_of(task, epoch)}", barrier, epoch, arrived, total)

    def _refuse(self, job: str, gang: str, attempt: int, task: int, epoch: int | None) -> None:
        """Count and (rate-limited) log a refused call, and raise its error. The names in
        it come from the caller and are cut short: a refusal must not echo a flood."""
        self._stats.auth_refusals += 1
        shown = _cut(f"{job}/{gang} attempt {attempt}")
        self._refusals.refused(f"from {shown} task {task}")
        raise BarrierAuthError(f"{shown}: refused: the call did not carry this attempt's token (or names "
                               "an attempt the coordinator does not know)",
                               BarrierId(job, gang, attempt), epoch)

    def log_refusals(self) -> None:
        """Log the summary of refusals not yet logged, if the log interval has passed
        (the server calls this periodically, so a burst followed by quiet is reported)."""
        self._refusals.flush()

    # ------------------------------------------------------------------- time
    def next_deadline(self) -> float | None:
        """The earliest time (clock seconds) at which an epoch times out, if any is running."""
        with self._lock:
            return self._next_deadline()

    def _next_deadline(self) -> float | None:
        """:meth:`next_deadline`, the lock held."""
        heap = self._deadlines
        while heap:
            deadline, _, a = heap[0]
            if self._open.get(a.key) is a and a.deadline() == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def _deadlines_moved(self) -> None:
        """Called, the lock held, whenever :meth:`next_deadline` may have moved: an epoch
        started, or one that was running ended or broke (opening, releasing and closing a
        gang of one task never moves it: its epoch is over as it starts). Nothing here: the
        gRPC server asks for the next deadline when it arms its timer; a coordinator that
        keeps a timer at it (:class:`~gangmaster.am.barrier.in_process.InProcessBarrier`)
        moves it here."""

    def expire(self) -> int:
        """Fail every epoch whose deadline has passed; returns how many calls failed.

        A timed-out attempt stays broken: every later call gets the same error (the
        gang must be restarted as a new attempt)."""
        now = self.clock.now()
        calls: list = []
        told = 0
        with self._lock:
            for a in self._open.values():
                d = a.deadline()
                if d is None or now < d:
                    continue
                missing = a.missing()
                shown = ", ".join(map(str, missing[:50])) + (" …" if len(missing) > 50 else "")
                err = BarrierTimeout(
                    f"{a.barrier} barrier epoch {a.epoch} timed out after {a.timeout_s:g} s: "
                    f"{len(a.arrivals)}/{a.total} tasks arrived; never arrived: {shown}",
                    a.barrier, a.epoch, len(a.arrivals), a.total, missing)
                a.broken = err
                self._deadlines_moved()
                self._stats.timeouts += 1
                waiters = a.take_waiters()
                told += _tasks_of(waiters)
                calls += [(w.callback, err) for w in waiters]
                log.error("%s", err)
        _deliver(calls)
        return told

    # ----------------------------------------------------------- observation
    def waiting(self) -> list[Progress]:
        """Progress of every attempt with a running epoch (for the coordinator's periodic log)."""
        with self._lock:
            return [self._progress(a) for a in self._open.values() if a.started_at is not None and a.broken is None]

    def waiting_tasks(self, job: str) -> int:
        """How many tasks of ``job``'s open attempts have a call held here now, waiting for
        their epoch's release (a host leader's message counts the tasks it speaks for)."""
        with self._lock:
            return sum(_tasks_of(ws) for (name, _gang), a in self._open.items() if name == job
                       for ws in a.waiters.values())

    def statistics(self) -> CoordinatorStatistics:
        with self._lock:
            s = CoordinatorStatistics(**vars(self._stats))
            s.attempts_open = len(self._open)
            s.calls_waiting = sum(_tasks_of(ws) for a in self._open.values() for ws in a.waiters.values())
            s.attempts_remembered = len(self._ended)
            s.gangs_known = len(set(self._open) | {(job, gang) for job, gang, _attempt in self._ended})
            return s


def _check_ranks(job: str, gang: str, attempt: int, tasks: tuple[TaskInfo, ...]) -> None:
    """``ValueError`` unless ``tasks`` are at least one, listed by index 0..N-1."""
    if not tasks:
        raise ValueError(f"{job}/{gang} attempt {attempt}: a barrier needs at least one task")
    for i, info in enumerate(tasks):
        if info.index != i:
            raise ValueError(f"{job}/{gang} attempt {attempt}: tasks[{i}] has index {info.index}; "
                             "tasks must be listed by index 0..N-1")


def _cut(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters (names from an unauthenticated caller)."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _call_of(task: int, epoch: int | None) -> str:
    return f"task {task} called at epoch {epoch}" if epoch is not None else f"task {task} asked"


def _same_token(known: str, given: str | None) -> bool:
    """Whether a call carries the attempt's token, compared in constant time (a token is
    ASCII: one that is not cannot be it)."""
    try:
        return hmac.compare_digest(known, given or "")
    except TypeError:   # not ASCII
        return False


class _HostWaiter(Waiter):
    """A host leader's waiting message: it stands for ``tasks`` tasks' calls."""

    __slots__ = ("tasks",)


def _tasks_of(waiters: Iterable[Waiter]) -> int:
    """How many tasks' calls ``waiters`` stand for."""
    return sum(w.tasks for w in waiters)


def _deliver(calls: list) -> None:
    for callback, outcome in calls:
        callback(outcome)
