"""Why a gang waits, as data: per role, what it needs, what it could get now, why
not the rest, whether waiting helps, who holds the capacity, and the smallest change
that would let it start.

Everything is computed from the placement kernel, never parsed from text:

* **placeable** per role: the gang's roles placed in order as the gang would place
  them (:func:`~gangmaster.am.core.gang_placement.place_each_role`), a role that falls
  short keeping what it placed, so every role is evaluated, not only the first
  that fails;
* **reasons**: the filter chain's rejections for the first instance of the role
  that found no node (their reason codes and counts, the nodes each counts), each
  marked ``waiting_helps``: a resource exhausted on a node where the containers of
  *other* applications hold what is missing (were they gone, one more instance
  would fit there) is worth waiting for; unhealthy or blacklisted nodes, labels,
  GPU types, nodes too small, the per-node cap and resources taken by the gang's
  own instances are not;
* **blocking jobs**: among the nodes where waiting helps, the applications holding
  the most of the exhausted resource, with their expected end when the caller
  knows it (in simulation the workload model does, a snapshot may);
* **preemption**: when the caller says how the RM (or the engine a snapshot came from)
  preempts (:class:`~gangmaster.am.core.victims.Outlook`), whom it would preempt for the
  gang: the RM's own choice among the same candidates (whole lower-priority gangs, the
  fewest GPU-hours of lost work first, each needed, checked by placing the gang with them
  gone: :func:`~gangmaster.am.core.victims.choose_victims`), not the blocking jobs' order;
* **hint**: the changes that make :func:`~gangmaster.am.core.gang_placement.place_gang`
  succeed — N more machines like one of the cluster's, restoring N of the
  unhealthy machines, the end of the job holding most — each estimated from the
  room per node and then *checked* by placing the whole gang on the changed view.

A diagnosis costs a handful of gang placements (about ten at most), so the AM
computes it once per change of the gang's situation, never per heartbeat.

::

    diagnosis = diagnose(view, job.gang_roles(0), pipeline, job=job.name, occupants=running)
    diagnosis.to_dict()      # the JSON of `gangmaster diagnose --json`
    print(diagnosis.text())  # what `gangmaster run` prints
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from gangmaster.selectors import explanation as why
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.domains import DomainAsk, domain_of
from gangmaster.selectors.explanation import Rejection
from gangmaster.selectors.fit import GPU_MILLI, Demand, fits, milli
from gangmaster.selectors.placement import room_per_node
from gangmaster.selectors.resources import ResourceDescriptor

from gangmaster.am.core.gang_domains import DomainShort
from gangmaster.am.core.gang_placement import (GangDoesNotFit, PipelineFor, RoleOutcome, check_fits_empty, empty_view,
                                               pipeline_of, place_each_role, place_gang, role_request)
from gangmaster.am.core.reservation_plan import (DECLARED, UNKNOWN, Hold, Reservation, expected_start_line,
                                                 gang_instances, plan_start)
from gangmaster.am.core.victims import OFF, ON, Outlook, RunningGang, fits_once_gone
from gangmaster.am.spec.jobspec_model import RoleSpec

__all__ = ["Occupant", "ShortfallReason", "RoleDiagnosis", "BlockingJob", "Diagnosis", "diagnose", "with_more_machines"]

#: Reasons that no amount of waiting removes (the rest of the chain's codes are
#: resources, split by who holds them).
_PERMANENT_DETAIL = {
    why.UNHEALTHY: "{n} machine(s) unhealthy, blacklisted or lost",
    why.LABEL_MISMATCH: "{n} machine(s) without label {requested}",
    why.GPU_TYPE_MISMATCH: "{n} machine(s) of another GPU type (want {requested})",
    why.GPU_NODE_RESERVED: "{n} GPU machine(s) kept for GPU jobs",
    why.ROLE_CAP_REACHED: "{n} machine(s) at the cap of {requested} instance(s) of the role per machine",
    why.ROLE_FAILED_HERE: "{n} machine(s) where the role already failed (avoided while the gang fits without them)",
    why.RACK_POLICY: "{n} machine(s) outside the racks the {requested} rack policy allows",
}
_RESOURCES = (why.MEMORY, why.VCORES, why.GPUS, why.GPU_MASK, why.GPU_SHARE, why.PORTS)
_UNIT = {why.MEMORY: "MB memory", why.VCORES: "vcores", why.GPUS: "GPUs", why.GPU_MASK: "of the named GPUs",
         why.GPU_SHARE: "milli of one GPU", why.PORTS: "ports"}
#: What a blocking job is said to hold of each resource: for a share, milli-GPU (a whole
#: GPU held counts 1000: a share waits for either to go).
_HELD_AS = {why.MEMORY: "memoryMB", why.VCORES: "vcores", why.GPUS: "gpus", why.GPU_MASK: "gpus",
            why.GPU_SHARE: "gpuMilli"}
#: How many blocking jobs a diagnosis names, and machines a hint names.
BLOCKING_SHOWN = 3
HOSTS_SHOWN = 3


@dataclass(frozen=True)
class Occupant:
    """Resources another application holds on a host (a running container, or all of
    an application's containers there), and when it is expected to end, in seconds
    from the diagnosis (None: unknown). A snapshot's running allocations have the
    same fields."""

    job: str
    host: str
    vcores: float
    memory_mb: int
    gpus: int
    expected_end_s: float | None = None
    #: shares of GPUs held, as (GPU index, milli-GPU) pairs (``gpus`` counts whole GPUs only)
    gpu_shares: tuple[tuple[int, int], ...] = ()
    #: the application's priority, as submitted (0: none given)
    priority: int = 0


@dataclass(frozen=True)
class ShortfallReason:
    """One reason some of a role's instances find no machine (a part of its shortfall): the
    filter chain's reason ``code`` (``gpus-exhausted``, ``label-mismatch``, ...), how many
    machines it holds for (``count``), whether waiting helps on them, and a sentence
    (``detail``). Not the RM's numbered :class:`~gangmaster.protocol.reasons.Reason`: this
    one is the AM's diagnosis, served as ``reasons`` in ``diagnose --json`` and ``/why``."""

    code: str
    count: int
    waiting_helps: bool
    detail: str

    def to_dict(self) -> dict:
        return {"code": self.code, "count": self.count, "waiting_helps": self.waiting_helps, "detail": self.detail}


@dataclass
class RoleDiagnosis:
    role: str
    needed: int
    placeable: int
    asked: dict          # one instance, as asked of the RM: vcores after requestRatio
    reasons: list[ShortfallReason] = field(default_factory=list)
    #: how the vcores asked come about: the role's cpu x requestRatio (shown when the ratio is not 1)
    cpu: float = 0.0
    request_ratio: float = 1.0

    @property
    def shortfall(self) -> int:
        return self.needed - self.placeable

    def to_dict(self) -> dict:
        return {"needed": self.needed, "placeable": self.placeable, "shortfall": self.shortfall,
                "asked": dict(self.asked), "reasons": [r.to_dict() for r in self.reasons]}


@dataclass
class BlockingJob:
    """An application holding the exhausted resource on machines where the gang would
    otherwise fit: on how many, how much in all, and when it is expected to end."""

    job: str
    machines: int
    holds: dict
    expected_end_s: float | None = None
    priority: int = 0   # its priority (0: none given; then left out of the dict)

    def to_dict(self) -> dict:
        return {"job": self.job, "machines": self.machines, "holds": dict(self.holds),
                "expected_end_s": self.expected_end_s, **({"priority": self.priority} if self.priority else {})}

    def phrase(self) -> str:
        held = ", ".join(f"{_num(v)} {k}" for k, v in self.holds.items())
        ranked = f" (priority {self.priority})" if self.priority else ""
        return f"{self.job}{ranked} holds {held} on {self.machines} of them" + _ends(self.expected_end_s)


@dataclass
class Diagnosis:
    job: str
    gang: str
    gang_can_start: bool
    fits_empty_cluster: bool
    healthy_machines: int
    machines: int
    roles: dict[str, RoleDiagnosis]
    blocking_jobs: list[BlockingJob] = field(default_factory=list)
    hint: str = ""
    #: when and on which machines the gang is expected to start, from the occupants' expected
    #: ends (:func:`expected_start`); None when it can start now or asks no whole GPU
    expected_start: Reservation | None = None
    #: whether an expected start was worked out (False: not asked, e.g. it can start now)
    planned: bool = False
    #: whether that start is a reservation the RM holds for the gang (a queue of ``policy: reserve``)
    reserved: bool = False
    #: the gang's own priority (its job's): blocking jobs above it are work it waits behind
    priority: int = 0
    #: the gangs the RM (or the snapshot's engine) would preempt to make room, as it chooses
    #: them (:class:`Outlook`'s candidates), and how it preempts; None: not told
    preempts: list[RunningGang] = field(default_factory=list)
    preemption: Outlook | None = None

    @property
    def preemption_grace_s(self) -> float | None:
        return self.preemption.grace_s if self.preemption is not None else None

    @property
    def behind_higher_priority(self) -> list[BlockingJob]:
        """The blocking jobs of a higher priority than this gang's: it waits behind them (a
        preemption would take lower-priority ones, never these)."""
        return [b for b in self.blocking_jobs if b.priority > self.priority]

    @classmethod
    def started(cls, job: str, gang: str, roles: Sequence[RoleSpec], nodes: Sequence) -> "Diagnosis":
        """The diagnosis of a gang that started: every instance placed (``nodes``: the RM's node reports)."""
        return cls(job, gang, True, True, sum(1 for n in nodes if n.state.usable), len(nodes),
                   {r.name: _role(r, r.instances, []) for r in roles})

    def to_dict(self) -> dict:
        return {"job": self.job, "gang": self.gang, "gang_can_start": self.gang_can_start,
                "fits_empty_cluster": self.fits_empty_cluster, "healthy_machines": self.healthy_machines,
                "machines": self.machines, "roles": {name: r.to_dict() for name, r in self.roles.items()},
                "blocking_jobs": [b.to_dict() for b in self.blocking_jobs], "hint": self.hint,
                **({"expected_start": _expected_start_dict(self.expected_start, self.reserved)} if self.planned else {}),
                **({"preempts": self._victims(), "preemption_grace_s": self.preemption_grace_s}
                   if self.preempts else {}),
                **({"preemption": {"engine": self.preemption.engine, "state": self.preemption.state,
                                   "why": self.preemption.why}}
                   if self.preemption is not None and self.preemption.engine and not self.gang_can_start else {})}

    def _victims(self) -> list[dict]:
        now = self.preemption.now if self.preemption is not None else 0.0
        return [{"job": v.name, "priority": v.priority.job, **({"queue_priority": v.priority.queue}
                                                                if v.priority.queue else {}),
                 "gpus": _round(v.gpus), "lost_gpu_h": round(v.lost_gpu_hours(now), 3)} for v in self.preempts]

    def preemption_line(self, why: bool = True) -> str:
        """What priority does for this gang: whom the RM will preempt for it (or, on a
        snapshot, whom its engine would, and whether its preemption is on), or whose work it
        waits behind (``why``: saying that it cannot preempt them); "" when none of these."""
        outlook = self.preemption
        if outlook is not None and outlook.engine and not self.gang_can_start:
            return engine_preemption_line(outlook, self._victims())
        if self.preempts:
            return will_preempt_line(self._victims(), self.preemption_grace_s or 0.0)
        above = self.behind_higher_priority
        if not above:
            return ""
        return (f"waits behind higher-priority work: {', '.join(b.job for b in above)}"
                + (f" (this job's priority is {self.priority}: it cannot preempt them)" if why else ""))

    def signature(self) -> dict:
        """What a change is judged on: everything but the clock (expected ends move as time passes)."""
        data = self.to_dict()
        data["blocking_jobs"] = [{k: v for k, v in b.items() if k != "expected_end_s"} for b in data["blocking_jobs"]]
        if data.get("preempts"):   # (their work lost grows as they run)
            data["preempts"] = [{k: v for k, v in v.items() if k != "lost_gpu_h"} for v in data["preempts"]]
        if data.get("expected_start"):
            data["expected_start"] = {k: v for k, v in data["expected_start"].items() if k not in ("in_s", "line")}
        return data

    def summary(self) -> str:
        """One line: each short role and its reasons, then the hint."""
        if self.gang_can_start:
            return "the gang can start now"
        parts = []
        for r in self.roles.values():
            if r.shortfall:
                reasons = ", ".join(x.detail + ("" if x.waiting_helps else " [waiting does not help]")
                                    for x in r.reasons)
                parts.append(f"{r.role} {r.placeable}/{r.needed} placeable, {r.shortfall} short ({reasons})")
        head = "; ".join(parts) or "every instance is placeable, but not all at once"
        preemption = self.preemption_line(why=False)
        if preemption:
            head += f"; {preemption}"
        return head + (f"; to unblock: {self.hint}" if self.hint else "")

    def text(self) -> str:
        """The diagnosis as lines for people (``gangmaster diagnose``, the AM's log)."""
        name = f"gang {self.gang} of job {self.job}" if self.gang else f"job {self.job}"
        lines = [f"{name}: " + ("can start now" if self.gang_can_start else "cannot start now")
                 + f"; {self.healthy_machines}/{self.machines} machines healthy"
                 + ("" if self.fits_empty_cluster else "; it does not fit even the empty cluster")]
        for r in self.roles.values():
            ratio = f" (cpu {_num(r.cpu)} x requestRatio {_num(r.request_ratio)})" if r.request_ratio != 1 else ""
            gpus = (f"gpuMilli={r.asked['gpuMilli']}" if r.asked.get("gpuMilli") else f"gpus={r.asked['gpus']}")
            asked = f"vcores={_num(r.asked['vcores'])}{ratio}, memoryMB={r.asked['memoryMB']}, {gpus}"
            lines.append(f"  {r.role}: needed {r.needed}, placeable {r.placeable}, shortfall {r.shortfall} "
                         f"(each asks {asked})")
            for x in r.reasons:
                helps = "waiting helps" if x.waiting_helps else "waiting does not help"
                lines.append(f"    {x.code}: {x.detail} ({helps})")
        if self.blocking_jobs:
            lines.append("  held by: " + "; ".join(b.phrase() for b in self.blocking_jobs))
        preemption = self.preemption_line()
        if preemption:
            lines.append(f"  {preemption}")
        if self.hint:
            lines.append(f"  to unblock: {self.hint}")
        if self.planned:
            lines.append(f"  {expected_start_line(self.expected_start, 0.0, reserved=self.reserved)}")
        return "\n".join(lines)


# ====================================================================== diagnose
def diagnose(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor, *, job: str,
             gang: str = "", occupants: Sequence[Occupant] = (),
             indices: Mapping[str, Sequence[int]] | None = None,
             own: Sequence[tuple[str, ResourceDescriptor]] = (), priority: int = 0,
             preemption: Outlook | None = None, reserved: Reservation | None = None) -> Diagnosis:
    """Diagnose the gang ``roles`` on ``view`` (the cluster as it is now; not changed).

    ``occupants``: what other applications hold, to name the blocking jobs (without
    them the diagnosis still says where waiting helps, but names no job).
    ``indices``: the instances still to place per role (the AM's, when some are
    granted already; they count as placeable); ``own``: the resources those granted
    containers hold (host, resource), so they are not taken for another job's.
    ``priority``: the gang's own (its job's), which the blocking jobs' are compared with;
    ``preemption``: how the RM (or a snapshot's engine) preempts for waiting gangs and the
    running gangs this one may preempt (None: it does not, or is not known to); the
    diagnosis names whom it would preempt, chosen as the RM chooses, on ``view``;
    ``reserved``: the reservation the RM holds for the gang, counted from now (a reserving
    queue's: :mod:`~gangmaster.tools.rmsim.reservations`): then the expected start is it."""
    explained: dict[str, tuple[list[ShortfallReason], dict]] = {}

    def explain(outcome: RoleOutcome, scratch: ClusterView) -> None:   # as the role saw the view
        port_min = pipeline_of(pipeline, outcome.role).settings.port_min
        explained[outcome.role.name] = _reasons(outcome, port_min, scratch, _others_free(view, scratch, own))

    outcomes, _ = place_each_role(view, roles, pipeline, indices, on_short=explain)
    by_host = defaultdict(list)
    for o in occupants:
        by_host[o.host].append(o)
    try:
        check_fits_empty(view, roles, pipeline)
        never = ""
    except GangDoesNotFit as exc:
        never = (f"none: the gang can never start on this cluster, even empty it holds {exc.placed}/{exc.total} "
                 f"instances; {exc.role}[{exc.index}] found no node: {exc.cause}")
    short = _domain_short(view, roles, pipeline, indices)
    diagnosed, waiting_nodes = {}, {}
    for outcome in outcomes:
        role = outcome.role
        reasons, helps = explained.get(role.name, ([], {}))
        placed = outcome.placed
        if short is not None and role.name in short.room_of:
            placed = min(placed, short.room_of[role.name])
            reasons = [*reasons, _domain_reason(short, waiting_helps=not never)]
        diagnosed[role.name] = _role(role, role.instances - outcome.wanted + placed, reasons)
        waiting_nodes.update(helps)
    can_start = all(r.shortfall == 0 for r in diagnosed.values())
    blocking = _blocking_jobs(view, waiting_nodes, by_host)
    diagnosis = Diagnosis(job, gang, can_start, not never, int(np.count_nonzero(view.healthy)), len(view),
                          diagnosed, blocking, priority=priority)
    if not can_start:
        hinting = _Hints(view, roles, pipeline, indices, diagnosed, by_host, blocking, waiting_nodes)
        hints = [never or hinting.hint()]
        if not never and preemption is not None:
            diagnosis.preemption = preemption
            diagnosis.preempts = list(preemption.victims(fits_once_gone(view, roles, pipeline, indices)))
        if short is not None and short.ask.required:
            hints.append(_preferred_instead(view, roles, pipeline, indices, short))
        diagnosis.hint = "; or ".join(h for h in hints if h)
        if not never and (reserved is not None or _short_of_gpus(diagnosed)):
            diagnosis.planned, diagnosis.reserved = True, reserved is not None
            diagnosis.expected_start = reserved or expected_start(view, roles, occupants, indices)
    return diagnosis


def _preferred_instead(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor,
                       indices: Mapping[str, Sequence[int]] | None, short: DomainShort) -> str:
    """The hint of asking the domain as a preference, checked: the gang placed over the
    fewest domains now, and how many that is ("" when it does not start even so)."""
    preferred = DomainAsk(short.ask.level, required=False)
    relaxed = tuple(replace(role, network_domain=preferred if role.network_domain == short.ask else role.network_domain,
                            gang_network_domain=preferred if role.gang_network_domain == short.ask
                            else role.gang_network_domain) for role in roles)
    try:
        placement = place_gang(view, relaxed, pipeline, indices=indices)
    except GangDoesNotFit:
        return ""
    spanned = {domain_of(view.specs[view.index(host)], short.ask.level) for host in set(placement.hosts())}
    return (f"networkDomain {{preferred: {short.ask.level}}} instead of {{required: {short.ask.level}}}: "
            f"it starts now over {len(spanned)} {short.ask.level}(s)")


def _domain_short(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor,
                  indices: Mapping[str, Sequence[int]] | None) -> DomainShort | None:
    """Why no domain of the level the gang (or a role) asks holds it now, when that is why
    it waits (None: it asks none, or a domain holds it, or another reason stops it first)."""
    if not any(role.network_domain or role.gang_network_domain for role in roles):
        return None
    try:
        place_gang(view, roles, pipeline, indices=indices)
    except GangDoesNotFit as exc:
        return exc.cause if isinstance(exc.cause, DomainShort) else None
    return None


def _domain_reason(short: DomainShort, waiting_helps: bool) -> ShortfallReason:
    """"no single rack has room for 6 × 4 GPUs (the best, rack-a, has room for 4 of the 6)",
    a reason of its own: waiting helps unless no domain holds the gang even when empty."""
    code = why.NETWORK_DOMAIN if waiting_helps else f"{why.NETWORK_DOMAIN}-too-small"
    detail = short.sentence() + ("" if waiting_helps else f", even when empty ({short.ask})")
    return ShortfallReason(code, short.domains, waiting_helps, detail)


def expected_start(view: ClusterView, roles: tuple[RoleSpec, ...], occupants: Sequence[Occupant],
                   indices: Mapping[str, Sequence[int]] | None = None) -> Reservation | None:
    """When, counted from now, and on which machines the gang's instances still to place fit
    by their GPUs, as the other jobs end when they are expected to (Slurm backfill's start
    time: :func:`~.reservation_plan.plan_start`). An end the occupant does not know holds its
    GPUs forever: then None, unless the gang fits without them. GPUs only: a gang short of
    memory or vcores starts later than this says."""
    healthy, free_col = view.healthy, view.gpus_free
    free = {host: (free_col.item(i) if healthy.item(i) else 0) for i, host in enumerate(view.hosts)}
    holds = [Hold(o.host, o.gpus, -math.inf, math.inf if o.expected_end_s is None else o.expected_end_s, o.job,
                  UNKNOWN if o.expected_end_s is None else DECLARED)
             for o in occupants if o.gpus and o.host in free and healthy.item(view.index(o.host))]
    counts = {name: len(chosen) for name, chosen in indices.items()} if indices else None
    return plan_start(0.0, free, holds, gang_instances(roles, counts), None)


#: the reasons of a role short of GPUs held by other jobs: only then is the expected start
#: (planned by GPUs alone) worth telling; a gang short of vcores, memory or ports is not told one
_GPU_WAITS = frozenset({f"{why.GPUS}-exhausted", f"{why.GPU_MASK}-exhausted"})


def _short_of_gpus(diagnosed: Mapping[str, RoleDiagnosis]) -> bool:
    """Some short role waits for GPUs that other jobs hold, and for nothing else waiting would give."""
    waits = {x.code for r in diagnosed.values() if r.shortfall for x in r.reasons if x.waiting_helps}
    return bool(waits) and waits <= _GPU_WAITS


def _expected_start_dict(planned: Reservation | None, reserved: bool) -> dict | None:
    if planned is None:
        return None
    return {"in_s": _round(planned.start_s), "machines": sorted(planned.gpus_by_host),
            "waits_for": list(planned.waits_for), "known": planned.known, "reserved": reserved,
            "line": expected_start_line(planned, 0.0, reserved=reserved)}


def _reasons(outcome: RoleOutcome, port_min: int, scratch: ClusterView,
             others: ClusterView) -> tuple[list[ShortfallReason], dict]:
    """The role's reasons, and {(role, reason): nodes} where waiting helps."""
    role = outcome.role
    demand = Demand.of(role_request(role, 1, ()).resource)
    out, helps = [], {}
    for rej in outcome.cause.explanation.rejections:
        if rej.reason not in _RESOURCES:
            detail = _PERMANENT_DETAIL.get(rej.reason, "{n} machine(s): " + rej.reason)
            out.append(ShortfallReason(rej.reason, rej.count, False,
                                       detail.format(n=rej.count, requested=rej.requested)))
        elif rej.kind == why.FILTERED:
            out.append(ShortfallReason(f"{rej.reason}-too-small", rej.count, False,
                                       f"{rej.count} machine(s) with too few {_UNIT[rej.reason]} even when empty "
                                       f"(need {_num(rej.requested)}, capacity at most {_num(rej.capacity)})"))
        else:
            out += _exhausted(rej, demand, port_min, scratch, others, role.name, helps)
    return out, helps


def _exhausted(rej: Rejection, demand: Demand, port_min: int, scratch: ClusterView, others: ClusterView,
               role: str, helps: dict) -> list[ShortfallReason]:
    """Split the nodes of an "exhausted" rejection: where other applications hold what is
    missing (waiting helps) and where the gang's own instances took it (it does not)."""
    rows = np.flatnonzero(rej.nodes) if rej.nodes is not None else np.zeros(0, dtype=np.int64)
    if rej.reason == why.PORTS or rows.size != rej.count:   # ports: not split (who holds them is not known)
        return [ShortfallReason(f"{rej.reason}-exhausted", rej.count, True,
                                f"{rej.count} machine(s) with too few free {_UNIT[rej.reason]} now "
                                f"(need {_num(rej.requested)})")]
    freed = fits(others, demand, port_min, rows=rows)
    out = []
    waiting, own = rows[freed], rows[~freed]
    if waiting.size:
        helps[(role, rej.reason)] = waiting
        out.append(ShortfallReason(f"{rej.reason}-exhausted", int(waiting.size), True,
                                   f"{waiting.size} machine(s) with {_UNIT[rej.reason]} exhausted by other jobs "
                                   f"(need {_num(rej.requested)}, "
                                   f"most free {_most_free(scratch, rej.reason, waiting)})"))
    if own.size:
        out.append(ShortfallReason(f"{rej.reason}-held-by-gang", int(own.size), False,
                                   f"{own.size} machine(s) whose {_UNIT[rej.reason]} the gang's own instances take "
                                   f"(need {_num(rej.requested)}, most free {_most_free(scratch, rej.reason, own)})"))
    return out


def _others_free(view: ClusterView, scratch: ClusterView, own: Sequence[tuple[str, ResourceDescriptor]]) -> ClusterView:
    """``scratch`` as it would be without any other application's containers: what is
    free plus what others use (the RM's usage less the gang's own granted containers).
    Only for the fit checks (its cached columns are not kept, but for the nodes where
    GPUs are freed: those go through ``set_free``)."""
    relaxed = scratch.copy()
    used_memory = view.memory_capacity - view.memory_free
    used_mvcores = view.mvcores_capacity - view.mvcores_free
    shared = view.gpu_share_used > 0                       # GPUs holding shares: freed share by share below
    shared_mask = (shared.astype(np.uint64) << np.arange(view.gpu_width, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    used_mask = view.gpu_capacity_mask & ~view.gpu_free_mask & ~shared_mask
    others_shares = view.gpu_share_used.copy()
    for host, resource in own:
        i = view.index(host)
        used_memory[i] -= resource.memory_mb
        used_mvcores[i] -= int(round(resource.vcores * 1000))
        if resource.gpu_milli:
            others_shares[i, resource.gpu_mask.bit_length() - 1] -= resource.gpu_milli
        else:
            used_mask[i] &= ~np.uint64(resource.gpu_mask)
    relaxed.memory_free = relaxed.memory_free + used_memory
    relaxed.mvcores_free = relaxed.mvcores_free + used_mvcores
    relaxed.gpu_free_mask = relaxed.gpu_free_mask | used_mask
    relaxed.gpus_free = relaxed.gpus_free + _popcount(used_mask)
    # the GPUs freed go through set_free, which keeps the share columns (cached per row) in step
    for i in np.flatnonzero(others_shares.any(axis=1) | (used_mask != 0)).tolist():
        milli_free = np.minimum(GPU_MILLI, relaxed.gpu_milli_free_rows([i])[0] + others_shares[i])
        wholly_free = sum(1 << k for k in range(int(view.gpu_capacity[i])) if milli_free[k] == GPU_MILLI)
        free = relaxed.free(i)
        relaxed.set_free(view.hosts[i], ResourceDescriptor.exactly(free.memory_mb, free.vcores, wholly_free,
                                                                   free.port_ranges), tuple(milli_free.tolist()))
    return relaxed


def _blocking_jobs(view: ClusterView, waiting_nodes: dict, by_host: Mapping[str, list]) -> list[BlockingJob]:
    """The applications holding the most of the exhausted resource on the nodes where
    waiting helps, most first."""
    wanted: dict[int, set[str]] = defaultdict(set)   # node -> what is exhausted there
    for (_role, reason), rows in waiting_nodes.items():
        for i in rows.tolist():
            wanted[i].add(_HELD_AS[reason])
    held: dict[str, dict] = {}
    for i, kinds in wanted.items():
        for o in by_host.get(view.hosts[i], ()):
            amounts = {kind: _held(o, kind) for kind in kinds}
            if not any(amounts.values()):
                continue
            entry = held.setdefault(o.job, {"hosts": set(), "holds": defaultdict(float), "ends": [],
                                            "priority": o.priority})
            entry["hosts"].add(i)
            for kind, amount in amounts.items():
                entry["holds"][kind] += amount
            entry["ends"].append(o.expected_end_s)
    jobs = []
    for name, entry in held.items():
        ends = entry["ends"]
        end = None if any(e is None for e in ends) else max(ends)
        jobs.append(BlockingJob(name, len(entry["hosts"]), {k: _round(v) for k, v in sorted(entry["holds"].items())},
                                end, entry["priority"]))
    jobs.sort(key=lambda b: (-b.machines, -sum(b.holds.values()), b.job))
    return jobs[:BLOCKING_SHOWN]


# ========================================================================= hints
class _Hints:
    """The smallest changes that let the gang start, each checked by placing the gang."""

    def __init__(self, view, roles, pipeline, indices, diagnosed, by_host, blocking, waiting_nodes):
        self.view, self.roles, self.pipeline, self.indices = view, roles, pipeline, indices
        self.short = {r.name: diagnosed[r.name].shortfall for r in roles if diagnosed[r.name].shortfall}
        self.by_host, self.blocking, self.waiting_nodes = by_host, blocking, waiting_nodes

    def hint(self) -> str:
        found = [h for h in (self._more_machines(), self._restore(), self._job_ends()) if h]
        if found:
            return ", or ".join(found)
        return ("no single change found: " + ", ".join(f"{n} more {role} instance(s) must fit"
                                                       for role, n in self.short.items()))

    def _starts(self, view: ClusterView) -> bool:
        try:
            place_gang(view, self.roles, self.pipeline, indices=self.indices)
        except GangDoesNotFit:
            return False
        return True

    def _room(self, view: ClusterView, role: RoleSpec) -> np.ndarray:
        chosen = pipeline_of(self.pipeline, role)
        return room_per_node(view, role_request(role, 1, (), chosen.settings.rack_policy), chosen.settings)

    def _smallest(self, estimate: int, most: int, works) -> int | None:
        """The smallest n in 1..most with ``works(n)`` (None: not even ``most``), for a
        monotone ``works`` (more of the change never hurts; none is known not to work).
        An exact estimate costs two placements: it works, one less does not."""
        high = max(1, min(estimate, most))
        if works(high):
            if high == 1 or not works(high - 1):
                return high
            low, high = 0, high - 1
        else:
            low = high
            while True:
                if low >= most:
                    return None
                high = min(most, low * 2)
                if works(high):
                    break
                low = high
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if works(mid) else (mid, high)
        return high

    # -------------------------------------------------------------- more machines
    def _more_machines(self) -> str:
        empty = empty_view(self.view)
        rooms = {role.name: self._room(empty, role) for role in self.roles if role.name in self.short}
        best = None
        for i in _distinct_kinds(self.view):
            if any(room[i] == 0 for room in rooms.values()):
                continue
            n = max(math.ceil(self.short[name] / int(room[i])) for name, room in rooms.items())
            if best is None or n < best[0]:
                best = (n, i)
        if best is None:
            return ""
        estimate, i = best
        spec = self.view.specs[i]
        # the estimate counts each short role alone; the search goes past it (other roles may
        # take some of the new machines), but not without end
        most = 4 * estimate + 16
        n = self._smallest(estimate, most, lambda k: self._starts(with_more_machines(self.view, spec, k)))
        return f"{n} more machine(s) like {spec.host}" if n else ""

    # ------------------------------------------------------------------ restore
    def _restore(self) -> str:
        down = np.flatnonzero(~self.view.healthy)
        if down.size == 0:
            return ""
        restored = self.view.copy()
        for i in down.tolist():
            restored.set_health(self.view.hosts[i], True)
        rooms = {role.name: self._room(restored, role)[down] for role in self.roles if role.name in self.short}
        order = down[np.argsort(-sum(rooms.values()), kind="stable")]
        estimate = 1
        for name, room in rooms.items():
            sorted_room = np.sort(room)[::-1]
            enough = np.searchsorted(np.cumsum(sorted_room), self.short[name])
            estimate = max(estimate, int(enough) + 1)

        def works(k: int) -> bool:
            view = self.view.copy()
            for i in order[:k].tolist():
                view.set_health(self.view.hosts[i], True)
            return self._starts(view)

        n = self._smallest(estimate, int(down.size), works)
        if not n:
            return ""
        named = [self.view.hosts[i] for i in order[:min(n, HOSTS_SHOWN)].tolist()]
        more = ", ..." if n > HOSTS_SHOWN else ""
        return f"restore {n} of the {down.size} unhealthy/blacklisted machines ({', '.join(named)}{more})"

    # ---------------------------------------------------------------- job ends
    def _without(self, jobs: set[str]) -> tuple[ClusterView, list[int]]:
        """The view with ``jobs``' holdings given back, and the nodes that changed."""
        view = self.view.copy()
        touched = []
        for host, occupants in self.by_host.items():
            mine = [o for o in occupants if o.job in jobs]
            if not mine or host not in view.host_index:
                continue
            i = view.index(host)
            before = view.free(i)
            view.set_free(host, *_plus(view, i, before, mine))
            touched.append(i)
        return view, touched

    def _job_ends(self) -> str:
        if not self.blocking:
            return ""
        job = self.blocking[0].job
        view, touched = self._without({job})
        if not self._starts(view):
            return ""
        (role, reason), rows = max(self.waiting_nodes.items(), key=lambda item: item[1].size)
        touched = set(touched)
        rows = [i for i in rows.tolist() if i in touched]
        if not rows:
            return f"when job {job} ends{_ends(self.blocking[0].expected_end_s)}"
        before = _span(_amount(self.view, reason, rows))
        after = _span(_amount(view, reason, rows))
        return (f"when job {job} ends{_ends(self.blocking[0].expected_end_s)}, {len(rows)} machine(s) get "
                f"{before} → {after} free {_UNIT[reason]}")


# ===================================================================== helpers
def _role(role: RoleSpec, placeable: int, reasons: list[ShortfallReason]) -> RoleDiagnosis:
    """A role's diagnosis; what one instance asks of the RM has its vcores after ``requestRatio``."""
    asked = {"vcores": milli(role.ask_vcores) / 1000, "memoryMB": role.memory_mb, "gpus": role.gpus}
    share = role.ask_resource().gpu_milli
    if share:
        asked["gpuMilli"] = share
    return RoleDiagnosis(role.name, role.instances, placeable, asked, reasons,
                         float(role.cpu), role.request_ratio)


def _distinct_kinds(view: ClusterView) -> list[int]:
    """One node of each kind (the same capacity, labels, GPU type; racks aside), the first
    healthy one of its kind where there is one (a hint names it as the example), kinds in
    the order first seen."""
    chosen: dict[tuple, int] = {}
    for i, s in enumerate(view.specs):
        kind = (s.memory_mb, s.vcores, s.gpus, s.gpu_type, s.labels, s.topology, s.ports)
        if kind not in chosen or (view.healthy[i] and not view.healthy[chosen[kind]]):
            chosen[kind] = i
    return list(chosen.values())


def with_more_machines(view: ClusterView, spec: NodeSpec, count: int) -> ClusterView:
    """``view`` with ``count`` more empty, healthy machines like ``spec``."""
    extra = [replace(spec, host=f"{spec.host}+{k + 1}") for k in range(count)]
    grown = ClusterView([*view.specs, *extra])
    n = len(view)
    for name in ("memory_free", "mvcores_free", "gpus_free", "gpu_free_mask", "ports_free_count", "healthy",
                 "outstanding"):
        getattr(grown, name)[:n] = getattr(view, name)
    grown.gpu_share_used[:n] = view.gpu_share_used        # a fresh view: its ledger is its own
    grown.gpus_shared[:n] = view.gpus_shared
    grown.ports_free[:n] = view.ports_free
    for role, counts in view.role_count.items():
        grown.instances_of(role)[:n] = counts
    for role, failed in view.role_failed.items():
        grown.role_failed[role] = np.concatenate([failed, np.zeros(count, dtype=bool)])
    return grown


def _plus(view: ClusterView, i: int, free: ResourceDescriptor,
          occupants: list[Occupant]) -> tuple[ResourceDescriptor, tuple[int, ...] | None]:
    """What is free on node ``i`` once ``occupants`` are gone (their GPUs taken from the used
    ones that hold no shares; their shares from the GPUs they name), and the milli-GPU free
    per GPU then (None where the node holds no shares), as ``set_free`` takes them."""
    gpus = sum(o.gpus for o in occupants)
    their_shares = sum(1 << gpu for gpu in {gpu for o in occupants for gpu, _ in o.gpu_shares})
    used = int(view.gpu_capacity_mask[i]) & ~free.gpu_mask & ~_shared_mask(view, i) & ~their_shares
    freed = 0
    while gpus and used:
        low = used & -used
        freed |= low
        used ^= low
        gpus -= 1
    memory = min(int(view.memory_capacity[i]), free.memory_mb + sum(o.memory_mb for o in occupants))
    mvcores = min(int(view.mvcores_capacity[i]),
                  int(round(free.vcores * 1000)) + sum(int(round(o.vcores * 1000)) for o in occupants))
    milli_free = _shares_gone(view, i, occupants)
    if milli_free is not None:   # a GPU whose shares are all gone is wholly free
        freed |= sum(1 << k for k, left in enumerate(milli_free) if left == GPU_MILLI)
    return (ResourceDescriptor(memory_mb=memory, vcores=mvcores / 1000, gpu_mask=free.gpu_mask | freed,
                               port_ranges=free.port_ranges), milli_free)


def _shared_mask(view: ClusterView, i: int) -> int:
    """The GPUs of node ``i`` that hold shares."""
    return sum(1 << k for k, used in enumerate(view.gpu_share_used[i].tolist()) if used)


def _shares_gone(view: ClusterView, i: int, occupants: list[Occupant]) -> tuple[int, ...] | None:
    """Milli-GPU free per GPU of node ``i`` once the shares of ``occupants`` are gone (None:
    neither the node nor they hold shares, its free GPUs say it all). A GPU full of shares
    reads as taken (0 free, as a view read from node reports has it): its occupants' shares
    give back what they hold there all the same."""
    if not view.gpus_shared[i] and not any(o.gpu_shares for o in occupants):
        return None
    milli_free = view.gpu_milli_free_rows([i])[0].copy()
    for o in occupants:
        for gpu, amount in o.gpu_shares:
            milli_free[gpu] = min(GPU_MILLI, milli_free[gpu] + amount)
    return tuple(milli_free.tolist())


def _amount(view: ClusterView, reason: str, rows) -> np.ndarray:
    if reason == why.GPU_SHARE:
        return view.gpu_share_max_free[rows]
    if reason == why.MEMORY:
        return view.memory_free[rows]
    if reason == why.VCORES:
        return view.mvcores_free[rows] / 1000
    return view.gpus_free[rows]


def _most_free(view: ClusterView, reason: str, rows) -> str:
    return _num(_round(float(np.max(_amount(view, reason, rows)))))


def _span(values: np.ndarray) -> str:
    low, high = float(values.min()), float(values.max())
    return f"{low:.1f}" if low == high else f"{low:.1f}–{high:.1f}"


def _held(o: Occupant, kind: str) -> float:
    if kind == "gpuMilli":
        return o.gpus * GPU_MILLI + sum(amount for _, amount in o.gpu_shares)
    return {"memoryMB": o.memory_mb, "vcores": o.vcores, "gpus": o.gpus}[kind]


def _popcount(masks: np.ndarray) -> np.ndarray:
    return np.array([bin(int(m)).count("1") for m in masks], dtype=np.int64)


def _round(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 3)


def _num(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def will_preempt_line(victims: Sequence[Mapping], grace_s: float) -> str:
    """``will preempt job X (priority 0, 4 GPUs, 1.5 GPU-h of work) in ~30 s grace``: what the
    RM will preempt for a gang (``victims``: the ``preempts`` entries of a diagnosis's JSON,
    in the order the RM chose them). The diagnosis's text and ``/why``'s say it alike."""
    return f"will preempt {_named(victims)} in ~{_num(grace_s)} s grace"


def engine_preemption_line(outlook: Outlook, victims: Sequence[Mapping]) -> str:
    """What a snapshot's engine would do for a gang that cannot start: whom it would preempt
    under its own rules when its preemption is on, or that it is off or unknown (and whom it
    would preempt were it on)."""
    engine, grace = outlook.engine, (f" in ~{_num(outlook.grace_s)} s grace" if outlook.grace_s is not None else "")
    because = f" ({outlook.why})" if outlook.why else ""
    if not outlook.judged:
        return f"{engine}'s preemption is {outlook.state}{because}: whom it would preempt cannot be told"
    would = (f"would preempt {_named(victims)}{grace}" if victims
             else "would preempt nothing (no lower-priority jobs whose preemption makes room)")
    if outlook.state == ON:
        return f"{engine} {would}" + (f"; its preemption is on{because}" if because else "")
    if outlook.state == OFF:
        return (f"{engine} preempts nothing here: its preemption is off{because}"
                + (f"; were it on, it {would}" if victims else ""))
    return f"{engine}'s preemption is unknown{because}: if it is on, it {would}"


def _named(victims: Sequence[Mapping]) -> str:
    def one(v: Mapping) -> str:
        figures = [f"priority {v['priority']}"]
        if v.get("queue_priority"):
            figures.append(f"queue priority {v['queue_priority']}")
        if "gpus" in v and "lost_gpu_h" in v:
            figures.append(f"{_num(v['gpus'])} GPUs, {v['lost_gpu_h']:.3g} GPU-h of work")
        return f"job {v['job']} ({', '.join(figures)})"
    return ", ".join(one(v) for v in victims)


def _ends(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds <= 0:
        return " (expected to end now)"
    hours, rest = divmod(int(round(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
    return f" (expected to end in {text})"
