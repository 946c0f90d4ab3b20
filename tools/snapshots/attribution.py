"""Who holds what on each node: the job listing's allocations checked against the node listing.

Engines report usage twice: per node (YARN's ``usedResource``, Slurm's ``alloc_cpus``)
and per job (YARN's containers, Slurm's ``job_resources``); Kubernetes only per pod.
The two files are dumped moments apart, so they can disagree. The node listing is taken
as the truth for how much is used (up to the node's capacity: a node reporting more in
use than it holds is taken as using what it holds); the job listing says whose it is:

* a job's allocation is cut to what its node still has unexplained (in the listing's
  order), so the allocations on a node never add up to more than the node reports used,
  nor more than its capacity;
* what the node reports used beyond its jobs' allocations is held by
  :data:`~.model.UNATTRIBUTED` (usage without a named job still blocks, and waiting for
  it may help, but nobody can be named);
* an allocation on a host no node listing has is dropped;
* a job's allocations on one host are added up into one (YARN lists each container, Kubernetes
  each pod), ending when the last of them ends.

Each correction is counted in a note, so the diagnosis can say how far to trust it.
"""
from __future__ import annotations

import re
from gangmaster.conf.limits import MAX_NAME_CHARS
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.fit import milli

from .model import UNATTRIBUTED, RunningAllocation, Usage, first_few

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def job_name(text: str) -> str:
    """A job's name as the RM takes an application's: control characters become ``?`` and
    a name past MAX_NAME_CHARS is cut (with ``...``)."""
    text = _CONTROL.sub("?", text) or "?"
    return text if len(text) <= MAX_NAME_CHARS else text[:MAX_NAME_CHARS - 3] + "..."


def reconcile(specs: list[NodeSpec], named: list[RunningAllocation],
              used: dict[str, Usage] | None) -> tuple[list[RunningAllocation], list[str]]:
    """The allocations to report and the notes on what was corrected (module docstring).

    ``used``: per host, what the node listing reports in use; ``None`` when the engine
    reports usage only per job (Kubernetes), and then each node's capacity bounds it."""
    by_host = {s.host: s for s in specs}
    left: dict[str, list[int]] = {}
    overfull: list[str] = []
    for spec in specs:
        bound = used.get(spec.host, Usage()) if used is not None else Usage(spec.vcores, spec.memory_mb, spec.gpus)
        reported = (milli(bound.vcores), bound.memory_mb, bound.gpus)
        capacity = (milli(spec.vcores), spec.memory_mb, spec.gpus)
        if any(r > c for r, c in zip(reported, capacity)):
            overfull.append(spec.host)
        left[spec.host] = [min(r, c) for r, c in zip(reported, capacity)]
    result: list[RunningAllocation] = []
    cut, unknown_hosts = 0, set()
    for alloc in named:
        room = left.get(alloc.host)
        if room is None:
            unknown_hosts.add(alloc.host)
            continue
        want = [milli(alloc.vcores), alloc.memory_mb, alloc.gpus]
        take = [min(w, r) for w, r in zip(want, room)]
        cut += take != want
        for k in range(3):
            room[k] -= take[k]
        if any(take):
            result.append(RunningAllocation(alloc.job, alloc.host, take[0] / 1000.0, take[1], take[2],
                                            alloc.expected_end_s))
    unattributed = 0
    if used is not None:
        for host, room in left.items():
            if any(room):
                unattributed += 1
                result.append(RunningAllocation(UNATTRIBUTED, host, room[0] / 1000.0, room[1], room[2]))
    notes = []
    if overfull:
        shown = first_few(overfull)
        notes.append(f"{len(overfull)} node(s) report more in use than they hold; taken as using what they hold: {shown}")
    if unattributed:
        notes.append(f"usage on {unattributed} node(s) is not attributed to a job (the job listing does not "
                     f"account for it, or none was given); it is held by {UNATTRIBUTED!r}")
    if cut:
        notes.append(f"{cut} job allocation(s) were cut to what their node reports in use or can hold (the "
                     "files were dumped at different moments?)")
    if unknown_hosts:
        shown = first_few(sorted(unknown_hosts))
        notes.append(f"allocations on {len(unknown_hosts)} host(s) that no node listing has were left out: {shown}")
    assert all(alloc.host in by_host for alloc in result)
    return _per_job_and_host(result), notes


def _per_job_and_host(allocations: list[RunningAllocation]) -> list[RunningAllocation]:
    merged: dict[tuple[str, str], list] = {}
    for a in allocations:
        total = merged.setdefault((a.job, a.host), [0, 0, 0, a.expected_end_s])
        total[0] += milli(a.vcores)
        total[1] += a.memory_mb
        total[2] += a.gpus
        if total[3] is not None:
            total[3] = None if a.expected_end_s is None else max(total[3], a.expected_end_s)
    return [RunningAllocation(job, host, mvcores / 1000.0, memory, gpus, ends)
            for (job, host), (mvcores, memory, gpus, ends) in merged.items()]
