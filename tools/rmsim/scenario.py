"""Fault scripts: "at time t, do X", read from YAML and played on the RM's clock.

::

    events:
      - at: 10                 # seconds on the RM clock (virtual, or since `rm serve` started)
        do: lose_node          # its containers end KILLED with exit status NODE_LOST
        host: dgx1-000
      - {at: 20, do: restore_node, host: dgx1-000}
      - {at: 12, do: mark_unhealthy, host: pcie4-001, report: "disk full"}   # blacklisted
      - at: 15
        do: fail_container     # ends FAILED with exitCode (default 1)
        app: app_0001          # the app's first live container (in id order) ...
        host: dgx1-001         # ... on this host (optional); or `container: <id>`
        exitCode: 3
      - {at: 16, do: kill_container, container: container_0001_01_000002}
      - {at: 30, do: kill_am, app: app_0001}   # the AM attempt dies; a new attempt may register
      - {at: 40, do: kill_app, app: app_0001}
      - {at: 50, do: preempt_app, app: app_0002, graceSeconds: 5}   # its AM told; PREEMPTED 5 s later

A step whose target does not exist when it fires (no such app or container yet)
is recorded in :attr:`Scenario.log` as skipped; the RM keeps serving.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from gangmaster.protocol.rm_protocol import RMError
from gangmaster.conf.fields import ConfigError, Fields, load_yaml, parse_yaml
from gangmaster.conf.limits import INT32, MAX_DURATION_S, MAX_PREEMPTION_GRACE_S

from .faults import FAULTS, Fault, apply
from .preemption import DEFAULT_GRACE_S

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class Step:
    at: float
    action: str
    host: str | None = None
    container: str | None = None
    app: str | None = None
    exit_code: int = 1
    text: str = ""
    grace_s: float = DEFAULT_GRACE_S


class Scenario:
    def __init__(self, steps: list[Step], source: str = "<api>"):
        self.steps = sorted(steps, key=lambda s: s.at)
        self.source = source
        self.log: list[tuple[float, str, str]] = []   # (time, action, outcome)

    @classmethod
    def load(cls, path: str | Path, hosts: set[str] | None = None) -> "Scenario":
        return cls.from_data(load_yaml(path), str(path), hosts)

    @classmethod
    def parse(cls, text: str, source: str = "<scenario>", hosts: set[str] | None = None) -> "Scenario":
        return cls.from_data(parse_yaml(text, source), source, hosts)

    @classmethod
    def from_data(cls, data, source: str, hosts: set[str] | None = None) -> "Scenario":
        doc = Fields(data, source)
        doc.reject_unknown(("events",))
        steps = []
        for ev in doc.list_of_mappings("events"):
            action = ev.string("do", choices=FAULTS)
            target = FAULTS[action].target
            ev.reject_unknown(("at", "do") + FAULTS[action].fields)
            at = ev.number("at", minimum=0, maximum=MAX_DURATION_S, limit="MAX_DURATION_S")
            host = ev.name("host") if "host" in ev else None
            if host is not None and hosts is not None and host not in hosts:
                raise ev.error("host", "a host of the cluster", host)
            container = ev.name("container") if "container" in ev else None
            app = ev.name("app") if "app" in ev else None
            if target == "container" and not (container or app):
                raise ev.error("container", "a container id, or `app` (and optionally `host`)")
            if target == "app" and not app:
                raise ev.error("app", "an application id")
            if target == "host" and not host:
                raise ev.error("host", "a host name")
            text = ev.string("report", "") if "report" in ev else (
                ev.string("diagnostics") if "diagnostics" in ev else "")
            exit_code = ev.integer("exitCode", 1, minimum=INT32[0], maximum=INT32[1])   # the RM's sint32
            grace = ev.number("graceSeconds", DEFAULT_GRACE_S, minimum=0, maximum=MAX_PREEMPTION_GRACE_S,
                              limit="MAX_PREEMPTION_GRACE_S")
            steps.append(Step(at, action, host, container, app, exit_code, text, grace))
        return cls(steps, source)

    def schedule(self, core) -> None:
        """Put every step on the core's clock (relative to now)."""
        start = core.clock.now()
        for step in self.steps:
            core.clock.call_at(start + step.at, self._fire, core, step)

    def _fire(self, core, step: Step) -> None:
        try:
            outcome = self._apply(core, step)
        except RMError as exc:
            outcome = f"skipped: {exc}"
        self.log.append((core.clock.now(), step.action, outcome))
        log.info("scenario %s at %.3f: %s %s", self.source, core.clock.now(), step.action, outcome)

    @staticmethod
    def _apply(core, step: Step) -> str:
        return apply(core, Fault(step.action, step.host or "", step.container or "", step.app or "",
                                 step.exit_code, step.text, step.grace_s), "scenario")


def check_hosts(scenario: Scenario, hosts: set[str]) -> None:
    for k, step in enumerate(scenario.steps):
        if step.host is not None and step.host not in hosts:
            raise ConfigError(scenario.source, f"events[{k}].host", "a host of the cluster", step.host)
