"""The task-side library: what a training process imports to meet the rest of its gang.

A task of a gang (an ordinary program; no asyncio needed) does::

    from gangmaster.am.task import BarrierTaskContext, StaleAttempt

    ctx = BarrierTaskContext.get()          # reads the GANGMASTER_* environment the AM set
    try:
        ctx.barrier()                       # wait until every task of the gang is here
    except StaleAttempt:                    # the AM restarted the gang: exit, a new attempt runs
        sys.exit(1)

This module is the whole of it, and light on purpose: it runs inside every training
process, so it loads the task side of barriers (:mod:`gangmaster.am.barrier.task_context`)
and their errors (:mod:`gangmaster.am.barrier.errors`) and none of the AM (its core,
placement, metrics) nor numpy. ``__all__`` is the library's promise (tests/unit/
test_task_library.py pins it): the context, where each task runs (:class:`TaskInfo`), the
errors a call can raise, typed and verbatim as the coordinator raised them, and the names
of the environment variables the AM sets for each task (README: *Environment*).
The old paths ``gangmaster.am.context`` and ``gangmaster.am.barrier_errors`` still work.
"""
from __future__ import annotations

from gangmaster.am.barrier.errors import (AttemptFailed, BarrierAuthError, BarrierError, BarrierId, BarrierInvalid,
                                          BarrierMismatch, BarrierTimeout, CoordinatorUnavailable, MessageTooLarge,
                                          StaleAttempt, StaleEpoch)
from gangmaster.am.barrier.local import ENV_LOCAL_GROUP, ENV_TREE
from gangmaster.am.barrier.task_context import (ENV_ADDRESS, ENV_ATTEMPT, ENV_GANG, ENV_JOB, ENV_LOG_INTERVAL,
                                                ENV_MAX_MESSAGE, ENV_PAI_ROLE, ENV_PAI_ROLE_INDEX, ENV_PREEMPTION_NOTICE,
                                                ENV_RETRY_GIVE_UP, ENV_ROLE, ENV_ROLE_INDEX, ENV_TASK_COUNT,
                                                ENV_TASK_INDEX, ENV_TLS_CA, ENV_TOKEN, REQUIRED_ENV,
                                                BarrierTaskContext, TaskInfo)

__all__ = [
    # the context and where each task runs
    "BarrierTaskContext", "TaskInfo",
    # the errors of its calls
    "BarrierId", "BarrierError", "BarrierTimeout", "StaleAttempt", "AttemptFailed", "StaleEpoch",
    "BarrierMismatch", "BarrierAuthError", "BarrierInvalid", "MessageTooLarge", "CoordinatorUnavailable",
    # the environment the AM sets for each task
    "REQUIRED_ENV", "ENV_ADDRESS", "ENV_TOKEN", "ENV_JOB", "ENV_GANG", "ENV_ATTEMPT", "ENV_TASK_INDEX",
    "ENV_TASK_COUNT", "ENV_ROLE", "ENV_ROLE_INDEX", "ENV_PAI_ROLE", "ENV_PAI_ROLE_INDEX", "ENV_TLS_CA",
    "ENV_LOG_INTERVAL", "ENV_RETRY_GIVE_UP", "ENV_MAX_MESSAGE", "ENV_LOCAL_GROUP", "ENV_TREE",
    "ENV_PREEMPTION_NOTICE",
]
