"""A log of refused calls that a token-guessing client cannot flood.

Both gRPC servers refuse calls without the right token — the barrier coordinator
(``am/barrier/coordinator.py``) and the live RM (``am/grpc_security.TokenAuthInterceptor``) — and
both log refusals through :class:`RefusalLog`. It lives apart from
``protocol/grpc_security.py`` so the barrier core, which knows nothing of gRPC, does not
import gRPC with it.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

__all__ = ["RefusalLog"]


class RefusalLog:
    """Logs refused calls without letting a token-guessing client flood the log: the
    first refusal is logged, later ones are counted and summarized in at most one line
    per ``interval_s`` of ``clock`` (seconds). A summary is written by the next refusal
    after the interval or by :meth:`flush`, which a server calls periodically so that a
    burst followed by quiet is reported too. Thread-safe.

    ``why`` says what was wrong with the calls; each refusal names its call::

        refusals = RefusalLog(log, "no token, or not the right one", interval_s=60)
        refusals.refused("to /gangmaster.rm.ResourceManager/Submit")
    """

    def __init__(self, logger: logging.Logger, why: str, interval_s: float,
                 clock: Callable[[], float] = time.monotonic):
        self.logger, self.why, self.interval_s, self.clock = logger, why, interval_s, clock
        self._lock = threading.Lock()
        self._logged_at: float | None = None
        self._unlogged = 0
        self._latest = ""

    def refused(self, call: str) -> None:
        """Count one refused call (``call`` names it, e.g. "from job/gang attempt 1 task 0")."""
        with self._lock:
            self._latest = call
            first = self._logged_at is None
            if first:
                self._logged_at = self.clock()
            else:
                self._unlogged += 1
        if first:
            self.logger.warning("refused a call %s: %s (further refusals are logged at most once every %g s)",
                                call, self.why, self.interval_s)
        else:
            self.flush()

    def flush(self) -> None:
        """Log the summary of the refusals not yet logged, if the interval has passed."""
        with self._lock:
            if not self._unlogged or self._logged_at is None:
                return
            now = self.clock()
            if now - self._logged_at < self.interval_s:
                return
            count, elapsed, latest = self._unlogged, now - self._logged_at, self._latest
            self._logged_at, self._unlogged = now, 0
        self.logger.warning("refused %d more call(s) in the last %.0f s (%s); the latest %s",
                            count, elapsed, self.why, latest)
