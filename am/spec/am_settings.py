"""The ``am:`` section of the configuration, typed (see ``conf/defaults.yaml``).

Every knob has a range, so a setting that cannot work is refused when the settings
are loaded, naming the file and the knob: a heartbeat of 1e-9 s was accepted and the
run never finished. Periods are at least ``MIN_PERIOD_S``; durations are finite and
at most ``MAX_DURATION_S``; counts of attempts at most ``MAX_ATTEMPTS``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from gangmaster.conf.fields import Fields
from gangmaster.conf.limits import MAX_ATTEMPTS, MAX_DURATION_S, MAX_HEARTBEAT_S, MIN_PERIOD_S
from gangmaster.conf.settings import Settings


@dataclass(frozen=True)
class AMSettings:
    heartbeat_s: float = 1.0
    hold_timeout_s: float = 60.0
    release_backoff_s: float = 10.0
    release_backoff_max_s: float = 300.0
    release_jitter: float = 0.5
    reselect_after_s: float = 5.0
    max_rejections: int = 3
    max_am_attempts: int = 3
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    max_virtual_time_s: float = 604800.0
    explain_after_s: float | None = 60.0
    max_wait_s: float | None = None
    simulated_max_wait_s: float = 86400.0

    @classmethod
    def from_fields(cls, f: Fields) -> "AMSettings":
        port = f.raw("metrics_port", None)
        backoff = _duration(f, "release_backoff_s", minimum=0.0)
        backoff_max = _duration(f, "release_backoff_max_s", minimum=0.0)
        if backoff_max < backoff:
            raise f.error("release_backoff_max_s", f"a number >= release_backoff_s ({backoff:g})",
                          backoff_max)
        return cls(
            heartbeat_s=f.number("heartbeat_s", minimum=MIN_PERIOD_S, maximum=MAX_HEARTBEAT_S,
                                 limit="MAX_HEARTBEAT_S"),
            hold_timeout_s=_duration(f, "hold_timeout_s", minimum=MIN_PERIOD_S),
            release_backoff_s=backoff,
            release_backoff_max_s=backoff_max,
            release_jitter=f.number("release_jitter", minimum=0, maximum=1),
            reselect_after_s=_duration(f, "reselect_after_s", minimum=0.0),
            max_rejections=f.integer("max_rejections", minimum=1, maximum=MAX_ATTEMPTS,
                                     limit="MAX_ATTEMPTS"),
            max_am_attempts=f.integer("max_am_attempts", minimum=1, maximum=MAX_ATTEMPTS,
                                      limit="MAX_ATTEMPTS"),
            metrics_port=None if port is None else f.integer("metrics_port", minimum=0, maximum=65535),
            metrics_host=f.string("metrics_host", "127.0.0.1"),
            max_virtual_time_s=_duration(f, "max_virtual_time_s", minimum=MIN_PERIOD_S),
            explain_after_s=None if f.raw("explain_after_s", None) is None else _duration(f, "explain_after_s",
                                                                                          minimum=0.0),
            max_wait_s=None if f.raw("max_wait_s", None) is None else _duration(f, "max_wait_s", minimum=MIN_PERIOD_S),
            simulated_max_wait_s=_duration(f, "simulated_max_wait_s", minimum=MIN_PERIOD_S),
        )

    def for_virtual_time(self) -> "AMSettings":
        """The settings a run in virtual time uses: without a ``max_wait_s`` of its own, a
        gang waits at most ``simulated_max_wait_s`` (a stuck simulated run ends with the
        diagnosis instead of running out ``max_virtual_time_s``)."""
        return self if self.max_wait_s is not None else replace(self, max_wait_s=self.simulated_max_wait_s)

    @classmethod
    def load(cls, override: str | None = None) -> "AMSettings":
        return cls.from_fields(Settings(override).section("am"))


def _duration(f: Fields, key: str, minimum: float) -> float:
    """A finite number of seconds within ``minimum``..MAX_DURATION_S."""
    return f.number(key, minimum=minimum, maximum=MAX_DURATION_S, limit="MAX_DURATION_S")
