"""The catalogue of reasons the RM gives across the protocol, and the one place they become text.

An RM says why it rejected an ask, why an ask still waits and for whom it preempts. Those
reasons used to cross the wire as free text, built by each RM (the simulator, the YARN and
Slurm backends) in its own words, so that a reader could only show them or guess at them by
parsing. Here each reason is a numbered :class:`ReasonCode` with its named, typed parameters
and one template: the RM builds a :class:`Reason` (code + parameters), the wire carries both
(and the rendered text, for an old peer), a reader decides on :attr:`Reason.code`, and
:func:`render` — which ``str(reason)`` calls — is the only code that turns a reason into words.

A reason read from an old peer, which sends its text alone, is :attr:`ReasonCode.OTHER` with
that text, as is an operator's own text (a preemption injected as a fault). An engine's own
word is a parameter of our code for what happened (Slurm's Reason field: ``SLURM_PENDING``
"Slurm job 7 pending: Resources"; sbatch's refusal: ``SLURM_REFUSED``). The numbers are the
wire's: never reuse or renumber one; add new codes with new numbers. For example::

    r = reason(ReasonCode.GPUS_SHORT, host="dgx-000", free=0, asked=8)
    str(r)        # 'host dgx-000: GPUs free 0 < 8 asked'
    r.params      # {'host': 'dgx-000', 'free': 0, 'asked': 8}
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable

from gangmaster.selectors.values import value

__all__ = ["ReasonCode", "Reason", "reason", "render", "NO_REASON", "other", "PARAMETERS", "TYPES", "CAUSED",
           "to_saved", "from_saved"]


class ReasonCode(IntEnum):
    """Why the RM did (not) do something; the numbers cross the wire."""

    NONE = 0                        # no reason given (renders as "")
    OTHER = 1                       # free text: an old peer's, or an engine's word without a code
    # a node that cannot hold the ask now
    HOST_NOT_USABLE = 10
    MEMORY_SHORT = 11
    VCORES_SHORT = 12
    SHARED_GPU_ABSENT = 13
    GPU_SHARE_SHORT = 14
    NO_GPU_WITH_SHARE = 15
    GPUS_TAKEN = 16
    GPUS_SHORT = 17
    PORTS_TAKEN = 18
    PORTS_SHORT = 19
    # a node that can never hold the ask (its capacity)
    MEMORY_NEVER = 30
    VCORES_NEVER = 31
    GPUS_NEVER = 32
    SHARED_GPU_NEVER = 33
    NO_GPU_TO_SHARE = 34
    GPU_MASK_NEVER = 35
    PORTS_NEVER = 36
    PORT_COUNT_NEVER = 37
    # the ask's queue
    QUEUE_MEMORY_LIMIT = 50
    QUEUE_VCORES_LIMIT = 51
    QUEUE_GPUS_LIMIT = 52
    QUEUE_SHARE_LIMIT = 53
    QUEUE_FULL = 54
    # where the ask may go
    NO_NODE_LABELLED = 60
    HOST_NOT_LABELLED = 61
    NO_NODE_FREE = 62
    NO_NODE_FREE_BECAUSE = 63
    RESERVED_FOR = 64
    BLACKLISTED = 65
    NEVER_FITS = 66
    # preemption
    PREEMPTED_FOR_APP = 70
    PREEMPTED_FOR_JOB = 71
    PREEMPTED_BY_FAULT = 72
    # YARN (tools/yarn): what its RM does not say, and what it cannot be asked
    YARN_NO_HOST = 80
    YARN_UNKNOWN_HOST = 81
    YARN_WHOLE_GPUS = 82
    YARN_OVER_LIMITS = 83
    YARN_GPUS_ABSENT = 84
    YARN_PORTS_OUTSIDE = 85
    YARN_NODE_GONE = 86
    YARN_NODE_UNUSABLE = 87
    YARN_NOT_GRANTED = 88
    # Slurm (tools/slurm)
    SLURM_WHOLE_GPUS = 90
    SLURM_GANG_HELD = 91
    SLURM_REFUSED = 92
    SLURM_ENDED_BEFORE_START = 93
    SLURM_PENDING = 94
    SLURM_ENDED_SAYING = 96
    SLURM_NO_HOST = 97
    SLURM_UNKNOWN_HOST = 98
    SLURM_UNKNOWN_HOST_IN_PARTITION = 99


@dataclass(frozen=True)
class _Spec:
    """A code's words: a format string over its parameters, or (where the words depend on
    the values: which limits an ask is over) a function of them."""

    template: str | Callable[[dict[str, Any]], str]
    types: tuple[tuple[str, type], ...]
    caused: bool   # it holds the reason it wraps (:attr:`Reason.cause`, shown as ``{cause}``)


def _spec(template: str | Callable[[dict[str, Any]], str], caused: bool = False, **types: type) -> _Spec:
    return _Spec(template, tuple(types.items()), caused)


def _scope(p: dict[str, Any]) -> str:
    """Where an ask looked: its host, else its rack ("" for none: the whole cluster)."""
    return p["host"] or (f"rack {p['rack']}" if p["rack"] else "the cluster")


#: Each code's template and its parameters, in order, with their types (what the wire's text
#: of each parameter is read back as). The one place reasons are worded.
_CATALOGUE: dict[ReasonCode, _Spec] = {
    ReasonCode.NONE: _spec(""),
    ReasonCode.OTHER: _spec("{text}", text=str),
    ReasonCode.HOST_NOT_USABLE: _spec("host {host} is {state}", host=str, state=str),
    ReasonCode.MEMORY_SHORT: _spec("host {host}: memory free {free_mb}MB < {asked_mb}MB asked",
                                   host=str, free_mb=int, asked_mb=int),
    ReasonCode.VCORES_SHORT: _spec("host {host}: vcores free {free:g} < {asked:g} asked",
                                   host=str, free=float, asked=float),
    ReasonCode.SHARED_GPU_ABSENT: _spec("host {host}: no GPU {gpu} (the node has {gpus}) for a share of {milli} milli",
                                        host=str, gpu=int, gpus=int, milli=int),
    ReasonCode.GPU_SHARE_SHORT: _spec("host {host}: GPU {gpu} has {free} milli free, {milli} asked",
                                      host=str, gpu=int, free=int, milli=int),
    ReasonCode.NO_GPU_WITH_SHARE: _spec("host {host}: no GPU with {milli} milli free (most free {most})",
                                        host=str, milli=int, most=int),
    ReasonCode.GPUS_TAKEN: _spec("host {host}: GPUs {taken:#x} of mask {mask:#x} are taken",
                                 host=str, taken=int, mask=int),
    ReasonCode.GPUS_SHORT: _spec("host {host}: GPUs free {free} < {asked} asked", host=str, free=int, asked=int),
    ReasonCode.PORTS_TAKEN: _spec("host {host}: ports {ports} are taken", host=str, ports=str),
    ReasonCode.PORTS_SHORT: _spec("host {host}: ports free {free} < {asked} asked", host=str, free=int, asked=int),
    ReasonCode.MEMORY_NEVER: _spec("host {host} has {has}MB memory, {asked}MB asked", host=str, has=int, asked=int),
    ReasonCode.VCORES_NEVER: _spec("host {host} has {has:g} vcores, {asked:g} asked",
                                   host=str, has=float, asked=float),
    ReasonCode.GPUS_NEVER: _spec("host {host} has {has} GPU(s), {asked} asked", host=str, has=int, asked=int),
    ReasonCode.SHARED_GPU_NEVER: _spec("host {host} has {has} GPU(s), GPU {gpu} named for a share of {milli} milli",
                                       host=str, has=int, gpu=int, milli=int),
    ReasonCode.NO_GPU_TO_SHARE: _spec("host {host} has {has} GPU(s), no GPU to share for a share of {milli} milli",
                                      host=str, has=int, milli=int),
    ReasonCode.GPU_MASK_NEVER: _spec("host {host} has {has} GPU(s); mask {mask:#x} names others",
                                     host=str, has=int, mask=int),
    ReasonCode.PORTS_NEVER: _spec("host {host} has ports {has}; {asked} asked", host=str, has=str, asked=str),
    ReasonCode.PORT_COUNT_NEVER: _spec("host {host} has {has} port(s), {asked} asked", host=str, has=int, asked=int),
    ReasonCode.QUEUE_MEMORY_LIMIT: _spec("queue {queue} is limited to {limit}MB memory, {asked}MB asked",
                                         queue=str, limit=int, asked=int),
    ReasonCode.QUEUE_VCORES_LIMIT: _spec("queue {queue} is limited to {limit:g} vcores, {asked:g} asked",
                                         queue=str, limit=float, asked=float),
    ReasonCode.QUEUE_GPUS_LIMIT: _spec("queue {queue} is limited to {limit} GPU(s), {asked} asked",
                                       queue=str, limit=int, asked=int),
    ReasonCode.QUEUE_SHARE_LIMIT: _spec("queue {queue} is limited to {limit} GPU(s), a share of {milli} milli asked",
                                        queue=str, limit=int, milli=int),
    ReasonCode.QUEUE_FULL: _spec("queue {queue} limit reached ({used:.0%} used)", queue=str, used=float),
    ReasonCode.NO_NODE_LABELLED: _spec("no node has label {label!r}", label=str),
    ReasonCode.HOST_NOT_LABELLED: _spec("host {host} does not have label {label!r}", host=str, label=str),
    ReasonCode.NO_NODE_FREE: _spec(lambda p: f"no usable node in {_scope(p)} has {p['resource']} free",
                                   host=str, rack=str, resource=str),
    ReasonCode.NO_NODE_FREE_BECAUSE: _spec(lambda p: f"no usable node in {_scope(p)} has {p['resource']} free "
                                                     f"({p['cause']})", caused=True, host=str, rack=str, resource=str),
    ReasonCode.RESERVED_FOR: _spec("node {host} is reserved for {gang} ({app_id}), expected to start in {wait_s:.0f}s, "
                                   "and this application is not declared to end by then",
                                   host=str, gang=str, app_id=str, wait_s=float),
    ReasonCode.BLACKLISTED: _spec("node {host} is blacklisted", host=str),
    ReasonCode.NEVER_FITS: _spec(lambda p: f"{p['resource']} can never fit on "
                                           f"{'rack ' + p['rack'] if p['rack'] else 'any node'} of the cluster "
                                           f"(largest node: {p['largest']})", resource=str, rack=str, largest=str),
    ReasonCode.PREEMPTED_FOR_APP: _spec("for {app_id} (priority {priority})", app_id=str, priority=str),
    ReasonCode.PREEMPTED_FOR_JOB: _spec("for job {job} (priority {priority})", job=str, priority=str),
    ReasonCode.PREEMPTED_BY_FAULT: _spec("preempted ({origin})", origin=str),
    ReasonCode.YARN_NO_HOST: _spec("no host: the YARN client asks for the node the AM chose (relax_locality false)"),
    ReasonCode.YARN_UNKNOWN_HOST: _spec("unknown host {host!r} (not a node of the YARN cluster at {rest})",
                                        host=str, rest=str),
    ReasonCode.YARN_WHOLE_GPUS: _spec("YARN counts whole GPUs (yarn.io/gpu): a share of one GPU (gpu_milli={milli}) "
                                      "cannot be asked of it", milli=int),
    ReasonCode.YARN_OVER_LIMITS: _spec(
        lambda p: "can never fit: asks " + "; ".join(
            f"{need:g} {what}, {where} {has:g}" for need, has, what, where in (
                (p["memory_mb"], p["node_memory_mb"], "MB memory", f"node {p['host']} has"),
                (p["vcores"], p["node_vcores"], "vcores", f"node {p['host']} has"),
                (p["gpus"], p["node_gpus"], "GPUs", f"node {p['host']} has"),
                (p["memory_mb"], p["max_memory_mb"], "MB memory", "YARN's largest container has"),
                (p["vcores"], p["max_vcores"], "vcores", "YARN's largest container has")) if need > has),
        host=str, memory_mb=int, vcores=int, gpus=int, node_memory_mb=int, node_vcores=float, node_gpus=int,
        max_memory_mb=int, max_vcores=float),
    ReasonCode.YARN_GPUS_ABSENT: _spec(
        lambda p: f"can never fit: GPU(s) {[k for k in range(p['mask'].bit_length()) if p['mask'] >> k & 1]} "
                  f"of {p['host']}, which has {p['has']}", mask=int, host=str, has=int),
    ReasonCode.YARN_PORTS_OUTSIDE: _spec("can never fit: ports {ports} outside {host}'s task ports {has}",
                                         ports=str, host=str, has=str),
    ReasonCode.YARN_NODE_GONE: _spec("not granted by YARN after {waited_s:.0f}s (node {node} gone from the RM)",
                                     waited_s=float, node=str),
    ReasonCode.YARN_NODE_UNUSABLE: _spec("not granted by YARN after {waited_s:.0f}s: node {host} is {state}",
                                         waited_s=float, host=str, state=str),
    ReasonCode.YARN_NOT_GRANTED: _spec("not granted by YARN after {waited_s:.0f}s (YARN says not why): {host} has "
                                       "{memory_mb} MB, {vcores:g} vcores, {gpus} GPU(s) free",
                                       waited_s=float, host=str, memory_mb=int, vcores=float, gpus=int),
    ReasonCode.SLURM_WHOLE_GPUS: _spec("Slurm gives whole GPUs only (GRES): a share of one GPU "
                                       "(gpu_milli={milli}) cannot be asked of it", milli=int),
    ReasonCode.SLURM_GANG_HELD: _spec("held back until the rest of its gang is asked again (a "
                                      "heterogeneous job cannot be changed)"),
    ReasonCode.SLURM_REFUSED: _spec("Slurm refused the job: {why}", why=str),
    ReasonCode.SLURM_ENDED_BEFORE_START: _spec("Slurm job {job_id} ended before it started", job_id=str),
    ReasonCode.SLURM_ENDED_SAYING: _spec("Slurm job {job_id} ended before it started: {why}", job_id=str, why=str),
    ReasonCode.SLURM_PENDING: _spec("Slurm job {job_id} pending: {why}", job_id=str, why=str),
    ReasonCode.SLURM_NO_HOST: _spec("no host: the Slurm client places asks on the host the AM chose"),
    ReasonCode.SLURM_UNKNOWN_HOST: _spec("unknown host {host!r} (not a node of the Slurm cluster)", host=str),
    ReasonCode.SLURM_UNKNOWN_HOST_IN_PARTITION: _spec(
        "unknown host {host!r} (not a node of the Slurm cluster partition {partition})", host=str, partition=str),
}

#: Each code's parameter names, in order (as :class:`Reason` holds them and the wire sends them).
PARAMETERS: dict[ReasonCode, tuple[str, ...]] = {c: tuple(n for n, _ in s.types) for c, s in _CATALOGUE.items()}
#: Each code's parameter types, in order (what the wire's text of each is read back as).
TYPES: dict[ReasonCode, tuple[type, ...]] = {c: tuple(t for _, t in s.types) for c, s in _CATALOGUE.items()}
#: The codes that wrap another reason (the one a node gave, within the one of its scope).
CAUSED: frozenset[ReasonCode] = frozenset(c for c, s in _CATALOGUE.items() if s.caused)


@value
class Reason:
    """One reason: its code and its parameters (in :data:`PARAMETERS` order), and for a code
    of :data:`CAUSED` the reason it wraps (kept whole, not as words). ``str()`` renders it;
    it is false when it gives none (:data:`NO_REASON`)."""

    code: ReasonCode
    args: tuple[Any, ...] = ()
    cause: Reason | None = None

    def __str__(self) -> str:
        return render(self)

    def __bool__(self) -> bool:
        return self.code is not ReasonCode.NONE

    @property
    def params(self) -> dict[str, Any]:
        """The parameters by name."""
        return dict(zip(PARAMETERS[self.code], self.args))


def reason(code: ReasonCode, cause: Reason | None = None, **params: Any) -> Reason:
    """The reason ``code`` with its parameters by name (each one the code has, no other) and,
    for a code of :data:`CAUSED`, the reason it wraps."""
    names = PARAMETERS[code]
    if len(params) != len(names) or (cause is None) == (code in CAUSED):
        raise TypeError(f"reason {code.name}: expected parameters {names}"
                        f"{' and a cause' if code in CAUSED else ''}, got {tuple(params)}")
    return Reason(code, tuple([params[n] for n in names]), cause)


def other(text: str) -> Reason:
    """A reason known only as text (an old peer's, an engine's word without a code); "" is none."""
    return Reason(ReasonCode.OTHER, (text,)) if text else NO_REASON


def render(r: Reason) -> str:
    """The words of ``r``: the one renderer of reasons to text."""
    spec = _CATALOGUE[r.code]
    if not spec.types:
        return spec.template
    params = dict(zip(PARAMETERS[r.code], r.args))
    if r.cause is not None:
        params["cause"] = render(r.cause)
    return spec.template(params) if callable(spec.template) else spec.template.format(**params)


NO_REASON = Reason(ReasonCode.NONE)


def to_saved(r: Reason) -> list:
    """``r`` as JSON values for a state file: its text, code, parameters (and cause)."""
    return [render(r), int(r.code), list(r.args)] + ([to_saved(r.cause)] if r.cause is not None else [])


def from_saved(saved: list) -> Reason:
    """A reason :func:`to_saved` wrote; a state file of a version before the codes holds
    the text alone (read as OTHER)."""
    if len(saved) == 1:
        return other(saved[0])
    return Reason(ReasonCode(saved[1]), tuple(saved[2]), from_saved(saved[3]) if len(saved) > 3 else None)
