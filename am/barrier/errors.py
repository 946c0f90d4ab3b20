"""The errors of barrier coordination, shared by the coordinator and the task side.

The coordinator raises one of these; the gRPC layer sends its code, message and
fields in the reply; the task side rebuilds the *same* class with the *same*
message (:func:`error_from_code`). So a task sees, verbatim and typed, what the
coordinator said — not a bare ``EOFError`` as PySpark's tasks do.

Every error names the barrier (job, gang, attempt) and the epoch; timeouts and
mismatches also carry the progress (n/N) and the indices of the tasks that never
arrived::

    try:
        ctx.barrier()
    except StaleAttempt:      # the AM restarted the gang: exit, a new attempt runs
        sys.exit(1)
"""
from __future__ import annotations

from typing import Sequence

from gangmaster.selectors.values import value

__all__ = ["BarrierId", "BarrierError", "BarrierTimeout", "StaleAttempt", "AttemptFailed", "StaleEpoch",
           "BarrierMismatch", "BarrierAuthError", "BarrierInvalid", "MessageTooLarge", "CoordinatorUnavailable",
           "ERROR_CLASSES", "error_from_code"]


@value
class BarrierId:
    """A barrier's identity: one per (job, gang, attempt)."""

    job: str
    gang: str
    attempt: int

    def __str__(self) -> str:
        return f"{self.job}/{self.gang} attempt {self.attempt}"


class BarrierError(Exception):
    """Base class: a coordinator refused or failed a barrier call.

    ``code`` is the stable wire name of the subclass; ``barrier``, ``epoch``,
    ``arrived``/``total`` and ``missing`` (task indices that never arrived) are
    filled where they are known (``None``/empty otherwise)."""

    code = "BARRIER_ERROR"

    def __init__(self, message: str, barrier: BarrierId | None = None, epoch: int | None = None,
                 arrived: int | None = None, total: int | None = None,
                 missing: Sequence[int] = ()):
        super().__init__(message)
        self.message = message
        self.barrier = barrier
        self.epoch = epoch
        self.arrived = arrived
        self.total = total
        self.missing = tuple(missing)


class BarrierTimeout(BarrierError):
    """Not every task arrived at an epoch within the barrier timeout."""

    code = "TIMEOUT"


class StaleAttempt(BarrierError):
    """The call names an attempt that is finished, superseded, failed or unknown."""

    code = "STALE_ATTEMPT"


class AttemptFailed(StaleAttempt):
    """The AM failed the attempt (a task of the gang died): the gang is being restarted."""

    code = "ATTEMPT_FAILED"


class StaleEpoch(BarrierError):
    """The call's epoch is one the coordinator has moved past (or has not reached)."""

    code = "STALE_EPOCH"


class BarrierMismatch(BarrierError):
    """Tasks of one attempt called different operations (barrier vs all_gather) at one epoch."""

    code = "MISMATCH"


class BarrierAuthError(BarrierError):
    """The call did not carry the secret token of an attempt the coordinator knows (a
    wrong token, or an attempt never opened or forgotten long ago); the refusal is
    counted. It says nothing else: a caller that cannot authenticate learns nothing."""

    code = "AUTH"


class BarrierInvalid(BarrierError):
    """A malformed call: a task index outside 0..N-1, an unknown operation."""

    code = "INVALID"


class MessageTooLarge(BarrierError):
    """An all_gather whose messages together (or one task's message) exceed
    ``barrier.max_message_bytes``: the gather fails on every task of the attempt, and the
    attempt stays failed (the same calls would fail again)."""

    code = "TOO_LARGE"


class CoordinatorUnavailable(BarrierError):
    """The task side could not reach the coordinator for longer than it was allowed to retry."""

    code = "UNAVAILABLE"


ERROR_CLASSES: dict[str, type[BarrierError]] = {
    cls.code: cls for cls in (BarrierError, BarrierTimeout, StaleAttempt, AttemptFailed, StaleEpoch,
                              BarrierMismatch, BarrierAuthError, BarrierInvalid,
                              MessageTooLarge, CoordinatorUnavailable)
}


def error_from_code(code: str, message: str, **fields) -> BarrierError:
    """Rebuild the typed error the coordinator raised; an unknown code gives a plain
    :class:`BarrierError` (a newer coordinator talking to an older task)."""
    return ERROR_CLASSES.get(code, BarrierError)(message, **fields)

