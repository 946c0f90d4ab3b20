"""Why nodes were turned down: verdicts with stable reason codes, counted per filter.

Two kinds of "no" are kept apart, as Nomad does, because they call for different
actions: ``filtered`` means the node can never take this request (wrong label,
GPU type, too small even when empty); ``exhausted`` means it could, but is full
right now (wait, or release something). Reason codes are constants; the numbers
(requested, the most any rejected node had free, capacity) go in fields.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

FILTERED = "filtered"     # can never fit on this node
EXHAUSTED = "exhausted"   # full right now

# Reason codes: stable strings, safe to match on in scripts and tests.
UNHEALTHY = "unhealthy"
LABEL_MISMATCH = "label-mismatch"
GPU_TYPE_MISMATCH = "gpu-type-mismatch"
GPU_NODE_RESERVED = "gpu-node-reserved"
ROLE_CAP_REACHED = "role-cap-reached"
ROLE_FAILED_HERE = "role-failed-here"
MEMORY = "memory"
VCORES = "vcores"
GPUS = "gpus"
GPU_MASK = "gpu-mask"
GPU_SHARE = "gpu-share"
PORTS = "ports"
RACK_POLICY = "rack-policy"
NETWORK_DOMAIN = "network-domain"   # the gang's nodes: no one domain of the level asked holds it all

_PHRASES = {
    UNHEALTHY: "unhealthy",
    LABEL_MISMATCH: "without label {requested}",
    GPU_TYPE_MISMATCH: "of another GPU type (want {requested})",
    GPU_NODE_RESERVED: "GPU nodes kept for GPU jobs",
    ROLE_CAP_REACHED: "at the cap of {requested} instance(s) of the role per node",
    ROLE_FAILED_HERE: "where the role already failed",
    RACK_POLICY: "outside the racks the {requested} rack policy allows",
    NETWORK_DOMAIN: "in a {requested} without room for all of it",
}


@dataclass
class Rejection:
    """How many nodes one filter turned down for one reason, with the numbers."""

    filter: str
    reason: str
    kind: str
    count: int
    requested: object = None
    most_free: object = None
    capacity: object = None
    #: Bool per node of the view: the nodes this rejection counts (for a diagnosis that
    #: asks more of them, e.g. whether another job holds what they lack); not shown.
    nodes: Any = field(default=None, repr=False, compare=False)

    def phrase(self) -> str:
        if self.reason == GPU_SHARE:
            if self.kind == FILTERED:
                return f"{self.count} without a GPU to share (need {_num(self.requested)} milli)"
            numbers = f", most free {_num(self.most_free)}" if self.most_free is not None else ""
            return f"{self.count} no GPU with {_num(self.requested)} milli free{numbers}"
        if self.reason in (MEMORY, VCORES, GPUS, PORTS, GPU_MASK):
            what = {"memory": "memory (MB)", GPU_MASK: "requested GPUs"}.get(self.reason, self.reason)
            state = "exhausted" if self.kind == EXHAUSTED else "too small"
            numbers = f"need {_num(self.requested)}"
            if self.kind == EXHAUSTED and self.most_free is not None:
                numbers += f", most free {_num(self.most_free)}"
            if self.kind == FILTERED and self.capacity is not None:
                numbers += f", capacity at most {_num(self.capacity)}"
            return f"{self.count} {what} {state} ({numbers})"
        return f"{self.count} " + _PHRASES.get(self.reason, self.reason).format(requested=self.requested)

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None and k != "nodes"}


def _num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass
class Explanation:
    """The filter chain's account of one select(): every rejection, in filter order."""

    total: int
    role: str
    rejections: list[Rejection] = field(default_factory=list)
    survivors: int = 0

    def count(self, reason: str) -> int:
        return sum(r.count for r in self.rejections if r.reason == reason)

    @property
    def filtered(self) -> int:
        return sum(r.count for r in self.rejections if r.kind == FILTERED)

    @property
    def exhausted(self) -> int:
        return sum(r.count for r in self.rejections if r.kind == EXHAUSTED)

    def summary(self) -> str:
        """``0/3040 nodes fit role server: 32 unhealthy, 90 vcores exhausted (need 7.5, most free 7)``"""
        head = f"{self.survivors}/{self.total} nodes fit role {self.role}"
        if not self.rejections:
            return head
        return head + ": " + ", ".join(r.phrase() for r in self.rejections)

    def to_dict(self) -> dict:
        return {
            "role": self.role, "total": self.total, "survivors": self.survivors,
            "filtered": self.filtered, "exhausted": self.exhausted,
            "rejections": [r.to_dict() for r in self.rejections],
            "summary": self.summary(),
        }


class NotAvailable(Exception):
    """No node can take the request; carries the explanation: ``explanation``, or a
    function that works it out when first read (the message reads it too), over what
    the function captured when no node fitted."""

    def __init__(self, explanation: "Explanation | Callable[[], Explanation]", detail: str = ""):
        super().__init__()
        self._explanation, self.detail = explanation, detail

    @property
    def explanation(self) -> Explanation:
        if not isinstance(self._explanation, Explanation):
            self._explanation = self._explanation()
        return self._explanation

    def __str__(self) -> str:
        return self.explanation.summary() + (f"; {self.detail}" if self.detail else "")


class StaleExplanation(RuntimeError):
    """A selection's explanation was first read after the view changed: it would
    describe another cluster than the one the selection saw."""

    def __init__(self, role: str):
        super().__init__(f"the explanation of a selection for role {role} was read after the view "
                         f"changed; read result.explanation before booking")
