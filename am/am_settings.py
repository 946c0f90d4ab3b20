"""The ``am:`` section of the configuration, typed (see ``conf/defaults.yaml``)."""
from __future__ import annotations

from dataclasses import dataclass

from gangmaster.conf.fields import Fields
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
    max_virtual_time_s: float = 604800.0

    @classmethod
    def from_fields(cls, f: Fields) -> "AMSettings":
        port = f.raw("metrics_port", None)
        return cls(
            heartbeat_s=f.number("heartbeat_s", minimum=0, exclusive_minimum=True),
            hold_timeout_s=f.number("hold_timeout_s", minimum=0, exclusive_minimum=True),
            release_backoff_s=f.number("release_backoff_s", minimum=0),
            release_backoff_max_s=f.number("release_backoff_max_s", minimum=0),
            release_jitter=f.number("release_jitter", minimum=0, maximum=1),
            reselect_after_s=f.number("reselect_after_s", minimum=0),
            max_rejections=f.integer("max_rejections", minimum=1),
            max_am_attempts=f.integer("max_am_attempts", minimum=1),
            metrics_port=None if port is None else f.integer("metrics_port", minimum=0, maximum=65535),
            max_virtual_time_s=f.number("max_virtual_time_s", minimum=0, exclusive_minimum=True),
        )

    @classmethod
    def load(cls, override: str | None = None) -> "AMSettings":
        return cls.from_fields(Settings(override).section("am"))
