"""A work folder belongs to one job: the job's identity is recorded in it on first use
and checked on every later one.

A ``gangmaster run`` into a folder that already holds a run carries that run on
(see :mod:`gangmaster.tools.job_runner`), so the folder must hold the *same* job:
the same name, the same spec (as read: comments and key order do not matter),
on the same cluster. Anything else is refused, naming both, before anything is
submitted::

    identity = JobIdentity.of(job, specs, "conf/clusters/default.yaml")
    earlier = claim(work_dir, identity)     # raises WorkFolderTaken; returns the journal's state
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from gangmaster.am.core.journal import JOURNAL_FILE, JournalState, read_records, read_state
from gangmaster.am.spec.jobspec_model import JobSpec
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.cluster import NodeSpec

IDENTITY_FILE = "job.json"


#: Fields the job spec gained after work folders were first written, with their defaults: a
#: spec's identity leaves each out while it holds its default, so that a folder written before
#: the field existed still belongs to the same job (a field added later goes here too).
LATER_JOB_FIELDS = {"priority": 0, "expected_duration_s": None}
LATER_ROLE_FIELDS = {"network_domain": None, "gang_network_domain": None}


def _drop_later_defaults(fields: dict, later: dict) -> None:
    for name, default in later.items():
        if name in fields and fields[name] == default:
            del fields[name]


@dataclass(frozen=True)
class JobIdentity:
    """Which job a work folder belongs to."""

    job: str
    spec_sha256: str       # of the spec as read (its file's path, comments and key order left out)
    cluster: str = field(compare=False)   # the cluster file as named on the command line, for messages
    cluster_sha256: str    # of the nodes the cluster file declares

    @classmethod
    def of(cls, job: JobSpec, specs: Sequence[NodeSpec], cluster: str) -> "JobIdentity":
        spec = job.to_dict()
        spec.pop("source", None)
        _drop_later_defaults(spec, LATER_JOB_FIELDS)
        for role in spec["roles"]:
            _drop_later_defaults(role, LATER_ROLE_FIELDS)
        nodes = [[s.host, s.rack, sorted(s.labels), s.gpu_type, s.topology, s.memory_mb, s.vcores, s.gpus,
                  str(s.ports)] for s in specs]
        return cls(job.name, _sha256(spec), cluster, _sha256(nodes))

    def describe(self) -> str:
        return (f"job {self.job!r} (spec sha256 {self.spec_sha256[:12]}) on cluster {self.cluster} "
                f"(sha256 {self.cluster_sha256[:12]})")


class WorkFolderTaken(ConfigError):
    """The work folder holds another job's run."""

    def __init__(self, folder: Path, recorded: str, wanted: str):
        self.source, self.field, self.expected = str(folder), "", "a work folder of this job"
        ValueError.__init__(self, f"{folder}: this work folder belongs to {recorded}, not to {wanted}; "
                                  f"give this job another --work-dir")


def claim(folder: str | Path, identity: JobIdentity) -> JournalState:
    """Check that ``folder`` is free or holds ``identity``'s job (recording it when new);
    returns what the folder's journal says of earlier runs (empty when there were none)."""
    folder = Path(folder)
    earlier = read_state(read_records(folder / JOURNAL_FILE))
    path = folder / IDENTITY_FILE
    if path.exists():
        recorded = _read(path)
        if recorded != identity:
            raise WorkFolderTaken(folder, recorded.describe() if recorded else f"an unreadable {path}",
                                  identity.describe())
        return earlier
    if not earlier.empty and earlier.job != identity.job:   # a run recorded before identities were
        raise WorkFolderTaken(folder, f"job {earlier.job!r}", identity.describe())
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(identity), indent=2) + "\n", encoding="utf-8")
    return earlier


def _read(path: Path) -> JobIdentity | None:
    try:
        return JobIdentity(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def _sha256(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
