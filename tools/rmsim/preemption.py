"""The RM's side of preemption, as YARN's contract has it: the victim's AM is told first
(a :class:`~gangmaster.protocol.rm_protocol.PreemptionMessage` in its next allocate response:
which containers, by when), and at the deadline every container still alive ends
``KILLED`` with :attr:`~gangmaster.protocol.rm_protocol.ExitStatus.PREEMPTED`.

A gang is preempted whole: :meth:`Preemptions.preempt` takes every live container of the
application, never some of them. A container under notice that ends before the deadline
(its task checkpointed and exited, or died of the notice's signal, or its AM gave it back)
ends preempted too (:meth:`Preemptions.exit_status`): the notice caused it, so its AM
restarts the gang without counting a failure. Which gangs to preempt is decided apart,
before anything is preempted (:mod:`.victims`).

The notice's delivery to the tasks is the AM's (it forwards it through the NodeManager:
:meth:`Preemptions.notify`). Contracts live in memory only: a state file does not keep
them (a restored RM's containers run on without notice).
"""
from __future__ import annotations

from gangmaster.protocol.reasons import Reason
from gangmaster.protocol.rm_protocol import ContainerState, ExitStatus, PreemptionMessage, WrongState

from .containers import Containers
from .records import Application

#: Seconds a preempted gang's tasks have between the notice and the end of their containers
#: when the caller names none (a scenario's ``preempt_app``, a replay's ``--preemption-grace``).
DEFAULT_GRACE_S = 30.0


class Preemptions:
    """The contracts in force: per container under notice, its deadline; per application,
    the notice its AM's next response carries."""

    def __init__(self, containers: Containers, clock, lock):
        self.containers, self.clock, self.lock = containers, clock, lock
        self.deadlines: dict[str, float] = {}            # container id -> when it is taken back
        self._notices: dict[str, PreemptionMessage] = {}  # app id -> the notice still to hand its AM
        self.preempted_apps = 0   # applications preempted since the RM started (whole gangs)

    def preempt(self, app: Application, grace_s: float, reason: Reason) -> PreemptionMessage:
        """Preempt ``app``'s whole gang: every live container of it ends preempted in
        ``grace_s`` seconds; its AM hears of it at its next heartbeat."""
        if grace_s < 0:
            raise ValueError(f"grace_s: expected a number >= 0, got {grace_s}")
        live = tuple(sorted(cid for cid, rec in app.containers.items() if not rec.state.finished
                            and cid not in self.deadlines))
        if not live:
            raise WrongState(f"application {app.app_id} holds no container to preempt")
        deadline = self.clock.now() + grace_s
        message = PreemptionMessage(live, deadline, reason)
        for cid in live:
            self.deadlines[cid] = deadline
        earlier = self._notices.get(app.app_id)
        self._notices[app.app_id] = (message if earlier is None else
                                     PreemptionMessage(earlier.containers + live, min(earlier.deadline, deadline),
                                                       reason))
        self.preempted_apps += 1
        self.clock.call_at(deadline, self._take_back, live)
        return message

    def under_notice(self, container_id: str) -> bool:
        """Whether the container is preempted already (its deadline is set)."""
        return container_id in self.deadlines

    def take_notice(self, app_id: str) -> PreemptionMessage | None:
        """The notice for ``app_id``'s AM, once (its next response carries it)."""
        return self._notices.pop(app_id, None) if self._notices else None

    def exit_status(self, container_id: str, exit_code: int) -> tuple[ContainerState, int, str] | None:
        """How a container under notice that ended by itself ends: preempted (None: not under notice)."""
        if container_id not in self.deadlines:
            return None
        return (ContainerState.KILLED, ExitStatus.PREEMPTED,
                f"preempted: ended with code {exit_code} after the preemption notice")

    def notify(self, container_id: str) -> float:
        """The AM forwards the notice to the container's task (through the NodeManager: a
        signal and a notice the task can read); the deadline."""
        deadline = self.deadlines.get(container_id)
        if deadline is None:
            raise WrongState(f"container {container_id} is not under a preemption notice")
        rec = self.containers.get(container_id)
        if rec.state is ContainerState.RUNNING:
            self.containers.node_manager.notify_preemption(rec, deadline)
        return deadline

    def _take_back(self, container_ids: tuple[str, ...]) -> None:
        """The deadline: every container still alive ends preempted."""
        with self.lock:   # (a timer of the clock: it calls in from outside the RM's calls)
            for cid in container_ids:
                rec = self.containers.records.get(cid)
                if rec is not None and not rec.state.finished:
                    self.containers.finish(rec, ContainerState.KILLED, ExitStatus.PREEMPTED,
                                           "preempted: the preemption notice's deadline passed")
                self.deadlines.pop(cid, None)
