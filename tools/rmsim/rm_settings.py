"""The ``rm:`` section of the configuration, typed (see ``conf/defaults.yaml``).

``gangmaster rm serve`` and ``gangmaster run`` read these knobs; every one has a
range, so a setting that cannot work (a 1e-9 s poll, an infinite grace period) is
refused when the settings load, naming the file and the knob.
"""
from __future__ import annotations

from dataclasses import dataclass

from gangmaster.conf.fields import Fields
from gangmaster.conf.limits import (MAX_DURATION_S, MAX_KILL_GRACE_S, MAX_LOOP_PERIOD_S,
                                    MAX_PREEMPTION_GRACE_S, MAX_WORKER_THREADS, MIN_PERIOD_S)
from gangmaster.conf.settings import Settings

from .preemption import DEFAULT_GRACE_S


@dataclass(frozen=True)
class RMSettings:
    process_poll_s: float = 0.1
    kill_grace_s: float = 2.0
    state_save_interval_s: float = 0.2
    grpc_workers: int = 8
    allocation_expiry_s: float | None = 600.0     # None: never
    scheduling_interval_s: float | None = None    # None: a pass at every AM heartbeat
    preemption: bool = False                      # `gangmaster run`: the preemption monitor (.preemption_monitor)
    preemption_grace_s: float = DEFAULT_GRACE_S   # a preempted gang's notice, seconds

    @classmethod
    def from_fields(cls, f: Fields) -> "RMSettings":
        return cls(
            process_poll_s=_period(f, "process_poll_s"),
            kill_grace_s=f.number("kill_grace_s", minimum=0, maximum=MAX_KILL_GRACE_S,
                                  limit="MAX_KILL_GRACE_S"),
            state_save_interval_s=_period(f, "state_save_interval_s"),
            grpc_workers=f.integer("grpc_workers", minimum=1, maximum=MAX_WORKER_THREADS,
                                   limit="MAX_WORKER_THREADS"),
            allocation_expiry_s=(None if f.raw("allocation_expiry_s", None) is None else
                                 f.number("allocation_expiry_s", minimum=MIN_PERIOD_S,
                                          maximum=MAX_DURATION_S, limit="MAX_DURATION_S")),
            scheduling_interval_s=(None if f.raw("scheduling_interval_s", None) is None
                                   else _period(f, "scheduling_interval_s")),
            preemption=f.boolean("preemption"),
            preemption_grace_s=f.number("preemption_grace_s", minimum=0, maximum=MAX_PREEMPTION_GRACE_S,
                                        limit="MAX_PREEMPTION_GRACE_S"),
        )

    @classmethod
    def load(cls, override: str | None = None) -> "RMSettings":
        return cls.from_fields(Settings(override).section("rm"))


def _period(f: Fields, key: str) -> float:
    return f.number(key, minimum=MIN_PERIOD_S, maximum=MAX_LOOP_PERIOD_S, limit="MAX_LOOP_PERIOD_S")
