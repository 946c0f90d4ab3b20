"""How each engine a snapshot comes from preempts for a waiting job, as far as its files
tell: whether its preemption is on, off or unknown, and whom it lets a job preempt, so that
``gangmaster diagnose --snapshot`` can say which running jobs a waiting gang would preempt
there (chosen as gangmaster's RM chooses among them: whole jobs, the fewest GPU-hours of lost
work first, each needed: :func:`~gangmaster.am.core.victims.choose_victims`), or say plainly
that it would not, or that the files cannot tell.

* **Kubernetes**: the scheduler preempts pods of a lower ``spec.priority`` (the value of
  their PriorityClass) for a pending pod of a higher one; that is its default
  (the DefaultPreemption plugin), which a pod listing cannot show switched off. It preempts
  pod by pod; here a job is preempted whole, and only when every pod of it is of lower
  priority (:class:`~.model.JobStanding` keeps the highest).
* **YARN**: the CapacityScheduler preempts for an application's priority only within its
  queue (intra-queue preemption), and only where the RM's preemption monitor runs: its
  ``/ws/v1/cluster/scheduler`` answer says so per queue (``intraQueuePreemptionDisabled``,
  true as well when the monitor is off). A waiting job goes to queue ``default``; without
  the scheduler answer, or with no such queue there, the state is unknown. (Preemption for
  a queue's guaranteed capacity is not a matter of priority, and not told here.)
* **Slurm**: it preempts by partition ``PriorityTier`` or by QOS, as ``PreemptType`` says
  (``scontrol show config``), never by a job's scheduling priority, which is all ``squeue``
  carries: the state is unknown and whom it would preempt cannot be told.
"""
from __future__ import annotations

from typing import Mapping

from gangmaster.am.core.victims import OFF, ON, UNKNOWN, Priority, QueueShare, RunningGang

from .json_doc import Value
from .model import EnginePreemption

#: The YARN queue a waiting job is taken to go to.
YARN_QUEUE = "default"


def lower_priority(priority: Priority, queue: str, gpus: float, victim: RunningGang,
                   shares: Mapping[str, QueueShare]) -> bool:
    """Kubernetes' rule: a job of a lower priority, in any namespace."""
    return victim.priority < priority


def lower_priority_same_queue(priority: Priority, queue: str, gpus: float, victim: RunningGang,
                              shares: Mapping[str, QueueShare]) -> bool:
    """YARN's intra-queue rule: a job of a lower priority in the same leaf queue."""
    return victim.priority < priority and leaf(victim.queue) == leaf(queue)


def leaf(queue: str) -> str:
    """A YARN queue's own name (``root.gpu`` → ``gpu``): the apps API gives paths, jobs names."""
    return queue.rsplit(".", 1)[-1]


KUBERNETES = EnginePreemption(
    "Kubernetes", ON, "the scheduler's default, DefaultPreemption; a pod listing cannot show it switched off",
    lower_priority)

SLURM = EnginePreemption(
    "Slurm", UNKNOWN, "it preempts by partition PriorityTier or QOS as PreemptType says (scontrol show config), "
                      "never by a job's priority, and squeue's JSON carries neither", None)


def yarn(schedulers: list[Value]) -> EnginePreemption:
    """YARN's preemption for queue :data:`YARN_QUEUE`, from its scheduler answer (if given)."""
    for doc in schedulers:
        found = _leaf_queue(doc.need("scheduler").get("schedulerInfo"), YARN_QUEUE)
        if found is None:
            continue
        path = found.text("queuePath", YARN_QUEUE)
        if found.get("intraQueuePreemptionDisabled") is None:
            break
        if found.need("intraQueuePreemptionDisabled").raw is True:
            return EnginePreemption("YARN", OFF, f"intraQueuePreemptionDisabled on queue {path}",
                                    lower_priority_same_queue)
        return EnginePreemption("YARN", ON, f"intra-queue preemption on queue {path}", lower_priority_same_queue)
    return EnginePreemption("YARN", UNKNOWN, f"no /ws/v1/cluster/scheduler answer in the snapshot says whether "
                                             f"queue {YARN_QUEUE} preempts", lower_priority_same_queue)


def _leaf_queue(info: Value | None, name: str) -> Value | None:
    """The queue of that name in the scheduler's tree of queues (None: not there)."""
    if info is None:
        return None
    if info.text("queueName", "") == name and info.get("queues") is None:
        return info
    queues = info.get("queues")
    for child in (queues.objects("queue") if queues is not None and queues.has("queue") else []):
        found = _leaf_queue(child, name)
        if found is not None:
            return found
    return None
