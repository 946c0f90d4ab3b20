"""The simulator's workload model: what a simulated task does once its container starts.

In virtual time no command runs. The simulated NodeManager
(:class:`~gangmaster.tools.rmsim.nodemanager.SimulatedNodeManager`) asks a
:class:`Workload` what a started container does, and the workload tells which task it
is the way a real program would, by the environment the AM launched it with:
``PAI_JOB_NAME`` (``<user>~<job>``), ``PAI_CURRENT_TASK_ROLE_NAME``,
``PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX`` and ``GANGMASTER_ATTEMPT``. Neither the
AM, nor the job spec it reads, nor the RM protocol carries a duration or an exit code.

**Tasks of a job** (:class:`JobWorkload`, which a driver tells of each job it
submits): a role's behaviour comes from the job file's simulation keys
(``gangmaster: simulatedDurationSeconds``, ``simulatedExitCode``, and the testing aids
``failOnAttempts``/``failInstance``/``failExitCode``/``failBeforeBarrier``;
``conf/jobs/README.md``), which
the job reader checks and carries untouched in ``JobSpec.simulation``. Such a task
first arrives at its gang's barrier (epoch 0) and, once every task of the gang has
arrived, runs for its duration and exits with its code. So barrier semantics hold in
simulation too: a task that never arrives keeps the others waiting until the AM fails
the attempt or the barrier times out, and a task told that its barrier failed exits
with :data:`BARRIER_ERROR_EXIT_CODE`, as a task whose ``barrier()`` raised would.

**Any other container** (a driver that talks to the RM directly, with no job): it
lasts ``GANGMASTER_SIMULATED_DURATION_S`` seconds from its environment and exits
with ``GANGMASTER_SIMULATED_EXIT_CODE`` (default 0), without a barrier; without a
duration it runs until it is stopped. :func:`raw_task_env` writes those variables::

    rm.start_container(cid, LaunchContext.of(["train"], env=raw_task_env(10, exit_code=3)))
"""
from __future__ import annotations

import math
from dataclasses import field
from types import MappingProxyType
from typing import Any, Mapping, Protocol

from gangmaster.am.spec.jobspec_model import JobSpec
from gangmaster.protocol.rm_protocol import InvalidRequest
from gangmaster.conf.limits import INT32, MAX_DURATION_S
from gangmaster.selectors.values import value

__all__ = ["Workload", "JobWorkload", "TaskBehaviour", "RoleBehaviour", "InjectedFailure", "raw_task_env",
           "RUNS_UNTIL_STOPPED", "DEFAULT_DURATION_S", "BARRIER_ERROR_EXIT_CODE", "ENV_DURATION", "ENV_EXIT_CODE"]

#: A task's simulated duration when its job file gives none (``simulatedDurationSeconds``).
DEFAULT_DURATION_S = 60.0
#: How a task told that its barrier failed (or timed out) exits: Python's status for an
#: uncaught exception, which is what ``barrier()`` raises in a real task.
BARRIER_ERROR_EXIT_CODE = 1
#: A container of no known job lasts this many seconds (see the module docstring).
ENV_DURATION = "GANGMASTER_SIMULATED_DURATION_S"
#: ... and exits with this code.
ENV_EXIT_CODE = "GANGMASTER_SIMULATED_EXIT_CODE"

ENV_JOB_NAME = "PAI_JOB_NAME"
ENV_ROLE = "PAI_CURRENT_TASK_ROLE_NAME"
ENV_ROLE_INDEX = "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"
ENV_ATTEMPT = "GANGMASTER_ATTEMPT"


# The workload's answers are values, declared as the RM protocol's messages are
# (gangmaster.selectors.values.value: slotted, compared and hashed by value, never changed
# once made, not frozen: a frozen __init__ costs four times as much, and a replay makes
# a role's behaviour per job).
@value
class TaskBehaviour:
    """What one started task does: take part in its gang's barrier (epoch 0) or not,
    then run ``duration_s`` (None: until stopped) and exit with ``exit_code``."""

    duration_s: float | None
    exit_code: int = 0
    joins_barrier: bool = True


#: A container nothing is known about: it runs until it is stopped.
RUNS_UNTIL_STOPPED = TaskBehaviour(None, 0, joins_barrier=False)


@value
class InjectedFailure:
    """Testing aid: in the listed attempts, instance ``instance`` of the role exits with
    ``exit_code`` at the end of its duration; or, ``before_barrier``, at once when it
    starts, never arriving at its barrier (the others wait for it)."""

    attempts: tuple[int, ...] = ()
    instance: int = 0
    exit_code: int = 1
    before_barrier: bool = False


#: No failure injected (what a role whose keys name none shares).
NO_FAILURE = InjectedFailure()
#: The simulation keys that inject a failure.
_FAILURE_KEYS = frozenset({"failOnAttempts", "failInstance", "failExitCode", "failBeforeBarrier"})


@value
class RoleBehaviour:
    """How every task of one role behaves in simulation."""

    duration_s: float = DEFAULT_DURATION_S
    exit_code: int = 0
    failure: InjectedFailure = NO_FAILURE
    #: What every task of the role does when no failure is injected into it (one
    #: value, shared by the gang's thousands of tasks).
    usual: TaskBehaviour = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.usual = TaskBehaviour(self.duration_s, self.exit_code)

    @classmethod
    def from_keys(cls, keys: Mapping[str, Any]) -> "RoleBehaviour":
        """From a role's simulation keys as the job file names them (``JobSpec.simulation``;
        the job reader has checked their values). A role with no failure injected is made
        once per duration and exit code (:data:`_PLAIN_ROLES`: a replay's jobs are told of
        one after another, tens of thousands, a few thousand durations)."""
        duration, exit_code = keys.get("simulatedDurationSeconds", DEFAULT_DURATION_S), keys.get("simulatedExitCode", 0)
        if _FAILURE_KEYS.isdisjoint(keys):
            plain = _PLAIN_ROLES.get((duration, exit_code))
            if plain is None:
                if len(_PLAIN_ROLES) >= _PLAIN_ROLES_KEPT:
                    _PLAIN_ROLES.clear()
                plain = _PLAIN_ROLES[(duration, exit_code)] = cls(float(duration), exit_code)
            return plain
        failure = InjectedFailure(tuple(keys.get("failOnAttempts", ())), keys.get("failInstance", 0),
                                  keys.get("failExitCode", 1), keys.get("failBeforeBarrier", False))
        return cls(float(duration), exit_code, failure)

    def task(self, index: int, attempt: int) -> TaskBehaviour:
        """Instance ``index`` of the role in gang attempt ``attempt`` (1-based)."""
        failure = self.failure
        if attempt in failure.attempts and index == failure.instance:
            if failure.before_barrier:
                return TaskBehaviour(0.0, failure.exit_code, joins_barrier=False)
            return TaskBehaviour(self.duration_s, failure.exit_code)
        return self.usual


#: A role's simulation keys when its job names none (read only).
_NO_KEYS: Mapping[str, Any] = MappingProxyType({})
#: The roles with no failure injected, by duration and exit code as their keys give them.
_PLAIN_ROLES: dict[tuple, RoleBehaviour] = {}
#: The most of them kept (then they are made afresh).
_PLAIN_ROLES_KEPT = 4096


class Workload(Protocol):
    """What the simulated NodeManager asks: what does the task launched with ``env`` do?
    Raises ``InvalidRequest`` for an environment it cannot read."""

    def task(self, env: Mapping[str, str]) -> TaskBehaviour: ...


class JobWorkload:
    """The tasks of the jobs it has been told of (:meth:`add_job`), each by its launch
    environment; any other container as the module docstring says."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, RoleBehaviour]] = {}

    def add_job(self, job: JobSpec) -> None:
        """Know the tasks of ``job`` (by its name, as its tasks' environment gives it). A
        second job of the same name must behave the same: tasks cannot tell them apart."""
        simulation, roles = job.simulation, {}
        for role in job.roles:   # (a loop, not a comprehension: no frame of its own per job)
            roles[role.name] = RoleBehaviour.from_keys(simulation.get(role.name, _NO_KEYS))
        known = self._jobs.setdefault(job.name, roles)
        if known is not roles and known != roles:
            raise ValueError(f"job {job.name!r}: another job of that name, simulated differently, is already "
                             "known; simulated tasks are told apart by their job's name")

    def forget_job(self, job: JobSpec) -> None:
        """``job`` is over and no task of it will start again: stop knowing it (a replay
        tells the workload of tens of thousands of jobs, one after another)."""
        self._jobs.pop(job.name, None)

    def task(self, env: Mapping[str, str]) -> TaskBehaviour:
        roles = self._jobs.get(env.get(ENV_JOB_NAME, "").rpartition("~")[2])
        behaviour = roles.get(env.get(ENV_ROLE, "")) if roles else None
        if behaviour is None:
            return raw_task(env)
        try:
            index, attempt = int(env[ENV_ROLE_INDEX]), int(env[ENV_ATTEMPT])
        except (KeyError, TypeError, ValueError):   # (named by the variable that is wrong)
            index, attempt = _env_int(env, ENV_ROLE_INDEX), _env_int(env, ENV_ATTEMPT)
        if behaviour.failure is NO_FAILURE:   # (most roles: every task as usual, whatever its index and attempt)
            return behaviour.usual
        return behaviour.task(index, attempt)


def raw_task(env: Mapping[str, str]) -> TaskBehaviour:
    """A container of no known job: as its ``GANGMASTER_SIMULATED_*`` variables say."""
    if ENV_DURATION not in env:
        return RUNS_UNTIL_STOPPED
    text = env[ENV_DURATION]
    try:
        duration = float(text)
    except ValueError:
        duration = math.nan
    if not 0 <= duration <= MAX_DURATION_S:
        raise InvalidRequest(f"launch.env {ENV_DURATION}: expected seconds within 0..{MAX_DURATION_S:g} "
                             f"(MAX_DURATION_S), got {text!r}")
    code = _env_int(env, ENV_EXIT_CODE, 0)
    if not INT32[0] <= code <= INT32[1]:
        raise InvalidRequest(f"launch.env {ENV_EXIT_CODE}: expected an exit code within {INT32[0]}..{INT32[1]}, "
                             f"got {code}")
    return TaskBehaviour(duration, code, joins_barrier=False)


def raw_task_env(duration_s: float, exit_code: int = 0) -> dict[str, str]:
    """The environment of a container with no job that lasts ``duration_s`` and exits with ``exit_code``."""
    return {ENV_DURATION: repr(float(duration_s)), ENV_EXIT_CODE: str(int(exit_code))}


def _env_int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = env.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(text)   # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidRequest(f"launch.env {name}: expected an integer, got {text!r}") from None
