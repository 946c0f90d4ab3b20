"""Slurm's JSON (``sinfo --json``, ``squeue --json``), read defensively.

The schema changes between Slurm versions; what is read here and how each shape is
taken (tested on output captured from Slurm 22.05.8, plus the newer shapes by hand;
numbers, state words and GRES are read by :mod:`.values`, as the snapshot reader reads them):

* numbers: a plain number (22.05), or ``{"set": bool, "infinite": bool, "number": n}``
  (23.02 and later); unset or infinite reads as the default given;
* states: ``"state": "idle"`` with ``"state_flags": [...]`` (22.05), or
  ``"state": ["IDLE", "DRAIN"]`` / ``"job_state": ["RUNNING"]`` (23.02 and later);
  read as one set of upper-case words;
* features: a comma-separated string (22.05) or a list;
* GRES: ``gpu:V100_0:1,gpu:V100_1:1`` with optional ``(S:0-1)`` socket suffixes;
  GRES in use: ``gpu:V100_1:1(IDX:1)``, ``gpu:a100:2(IDX:0,2-3)``, ``gpu:0``;
* exit codes: an integer wait status (22.05: ``exit_code`` is the code, signals in
  ``derived_exit_code``), or ``{"status": [...], "return_code": n, "signal": {...}}``.

Anything else (not JSON, a key given twice in an object, no ``nodes`` / ``jobs`` list, a node
without a name) raises
:class:`SlurmJSONError` saying what was expected, never a KeyError deep inside the AM.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace

from gangmaster.conf.json_keys import DuplicateKeys, first_duplicate

from .names import UNTYPED_GPU, split_per_gpu_type
from .values import gpu_entries, number, state_words

#: Node states in which a node takes no new work (Slurm's base states and flags).
DEAD_STATES = frozenset({"DOWN", "FAIL", "FAILING", "NOT_RESPONDING", "UNKNOWN", "FUTURE", "POWERED_DOWN",
                         "POWER_DOWN", "POWERING_DOWN", "REBOOT_REQUESTED", "REBOOT_ISSUED"})
DRAINED_STATES = frozenset({"DRAIN", "DRAINED", "DRAINING", "MAINTENANCE", "RESERVED", "INVALID_REG"})
IDLE_STATE = "IDLE"


class SlurmJSONError(ValueError):
    """Slurm's JSON is not what this reader understands (the message says what was expected)."""


def text_list(value) -> list[str]:
    """A comma-separated string or a list of strings."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return [str(item).strip() for item in value if str(item).strip()]
    return []


# --------------------------------------------------------------------- nodes
@dataclass(frozen=True)
class SlurmNode:
    """What the AM needs of a node."""

    name: str
    states: frozenset[str]
    cpus: int
    alloc_cpus: int
    memory_mb: int
    alloc_memory_mb: int
    features: tuple[str, ...]
    gpu_type: str | None
    gpus: int
    per_gpu_types: bool          # each GPU is its own GRES type: exact GPU choice possible
    used_gpus: frozenset[int]
    partitions: tuple[str, ...] = ()
    reason: str = ""
    address: str = ""

    @property
    def usable(self) -> bool:
        return not (self.states & DEAD_STATES) and not (self.states & DRAINED_STATES)

    @property
    def lost(self) -> bool:
        return bool(self.states & DEAD_STATES)

    @property
    def idle(self) -> bool:
        return IDLE_STATE in self.states and self.usable


def _load(text: str, key: str, what: str):
    duplicated = DuplicateKeys()
    try:
        doc = json.loads(text, object_pairs_hook=duplicated.object)
    except ValueError as exc:
        raise SlurmJSONError(f"{what}: not JSON ({exc})") from None
    if duplicated.seen:   # json.loads would keep the last of the two without a word
        keys, twice = first_duplicate(doc)
        where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys + [twice]).lstrip(".")
        raise SlurmJSONError(f"{what}: {where}: expected each key once in an object; "
                             f'"{twice}" is given twice')
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise SlurmJSONError(f"{what}: expected an object with a {key!r} list, got "
                             f"{type(doc).__name__}{' with keys ' + ', '.join(sorted(doc)[:8]) if isinstance(doc, dict) else ''}")
    errors = [e for e in doc.get("errors") or [] if e]
    if errors:
        raise SlurmJSONError(f"{what}: Slurm reported {errors[0]}")
    return doc[key]


def slurm_version(text: str) -> str:
    """The ``meta.Slurm.release`` (or version numbers) of a JSON document; "" when absent."""
    try:
        meta = json.loads(text).get("meta") or {}
    except (ValueError, AttributeError):
        return ""
    slurm = meta.get("Slurm") or meta.get("slurm") or {}
    if slurm.get("release"):
        return str(slurm["release"])
    version = slurm.get("version") or {}
    if isinstance(version, dict) and version:
        return f"{version.get('major', '?')}.{version.get('minor', '?')}.{version.get('micro', '?')}"
    return ""


def read_nodes(text: str) -> list[SlurmNode]:
    """The nodes of ``sinfo --json`` (or ``scontrol show nodes --json`` of newer versions).
    A node listed twice (``sinfo`` lists a node once per partition) is read once."""
    nodes: dict[str, SlurmNode] = {}
    for i, raw in enumerate(_load(text, "nodes", "node list")):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise SlurmJSONError(f"node list: nodes[{i}] has no name")
        node = read_node(raw)
        if node.name in nodes:
            node = nodes[node.name] if node.partitions == () else _merge(nodes[node.name], node)
        nodes[node.name] = node
    return list(nodes.values())


def _merge(a: SlurmNode, b: SlurmNode) -> SlurmNode:
    """One node listed under two partitions: one node in both."""
    return replace(a, partitions=tuple(dict.fromkeys(a.partitions + b.partitions)))


def read_node(raw: dict) -> SlurmNode:
    gres = gpu_entries(raw.get("gres", ""))
    typed = [(e, split_per_gpu_type(e.type)) for e in gres if e.type]
    per_gpu = bool(gres) and all(split and e.count == 1 for e, split in typed) and len(typed) == len(gres)
    gpus = sum(e.count for e in gres)
    if per_gpu:
        gpu_type = typed[0][1][0]
        gpus = max(split[1] for _e, split in typed) + 1
    else:
        gpu_type = next((e.type for e in gres if e.type), UNTYPED_GPU if gpus else None)
    used: set[int] = set()
    for entry in gpu_entries(raw.get("gres_used", "")):
        if per_gpu and entry.type and split_per_gpu_type(entry.type) and entry.count:
            used.add(split_per_gpu_type(entry.type)[1])
        used.update(entry.idx)
    features = text_list(raw.get("active_features") or raw.get("features") or "")
    partitions = tuple(text_list(raw.get("partitions") or []))
    reason = raw.get("reason", "")
    if isinstance(reason, dict):
        reason = reason.get("description", "")
    return SlurmNode(
        name=raw["name"], states=frozenset(state_words(raw.get("state"), raw.get("state_flags"))),
        cpus=int(number(raw.get("cpus"))), alloc_cpus=int(number(raw.get("alloc_cpus"))),
        memory_mb=int(number(raw.get("real_memory"))), alloc_memory_mb=int(number(raw.get("alloc_memory"))),
        features=tuple(features), gpu_type=gpu_type, gpus=gpus, per_gpu_types=per_gpu,
        used_gpus=frozenset(g for g in used if 0 <= g < max(gpus, 1)), partitions=partitions,
        reason=str(reason or ""), address=str(raw.get("address") or ""))


# ---------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class SlurmJob:
    """One job record of ``squeue --json``: a heterogeneous job has one per component
    (``het_job_id`` the leader's id, ``het_job_offset`` the component)."""

    job_id: int
    het_job_id: int
    het_offset: int
    name: str
    states: frozenset[str]
    reason: str
    nodes: str
    gpu_indices: tuple[int, ...] = ()     # from gres_detail, while it runs
    exit_code: int | None = None
    signal: int | None = None

    @property
    def leader(self) -> int:
        return self.het_job_id or self.job_id

    @property
    def pending(self) -> bool:
        return "PENDING" in self.states or "CONFIGURING" in self.states

    @property
    def running(self) -> bool:
        return "RUNNING" in self.states and not self.ended

    @property
    def ended(self) -> bool:
        return bool(self.states & ENDED_JOB_STATES)

    @property
    def node_failed(self) -> bool:
        return "NODE_FAIL" in self.states


ENDED_JOB_STATES = frozenset({"COMPLETED", "COMPLETING", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                              "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"})


def _exit(value) -> tuple[int | None, int | None]:
    """(return code, signal) of an ``exit_code`` in either shape."""
    if isinstance(value, dict):
        code = number(value.get("return_code"), None)
        sig = value.get("signal") or {}
        signal = number(sig.get("id") if isinstance(sig, dict) else sig, None)
        return code, signal or None
    code = number(value, None)
    return (None, None) if code is None else (int(code), None)


def read_jobs(text: str) -> list[SlurmJob]:
    jobs = []
    for i, raw in enumerate(_load(text, "jobs", "job list")):
        if not isinstance(raw, dict) or number(raw.get("job_id"), None) is None:
            raise SlurmJSONError(f"job list: jobs[{i}] has no job_id")
        gpus = [g for entry in gpu_entries(raw.get("gres_detail")) for g in entry.idx]
        code, sig = _exit(raw.get("exit_code"))
        reason = raw.get("state_reason", "")
        jobs.append(SlurmJob(
            job_id=int(number(raw["job_id"])), het_job_id=int(number(raw.get("het_job_id"))),
            het_offset=int(number(raw.get("het_job_offset"))), name=str(raw.get("name", "")),
            states=frozenset(state_words(raw.get("job_state"), raw.get("state"))), reason=str(reason or ""),
            nodes=str(raw.get("nodes") or ""), gpu_indices=tuple(gpus), exit_code=code, signal=sig))
    return jobs
