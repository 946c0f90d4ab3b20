"""The one-role job the tests write, as OpenPAI v2 YAML: unit, property and end-to-end tests
import it (``from job_texts import one_role_job``; tests/ is on ``sys.path``)."""
from __future__ import annotations

import json
from typing import Sequence


def one_role_job(name: str = "j", instances: int = 1, *, gpus: int = 1, command: str | Sequence[str] = "train",
                 duration: float | None = None, ports: str = "", role_keys: Sequence[str] = (),
                 role_gangmaster: str = "", retry: int | None = None, job_gangmaster: str = "") -> str:
    """A job of one role, ``worker``: ``instances`` of 1 vcore, 1 GiB and ``gpus`` GPUs each,
    running ``command`` (or each command of a list, in order; written quoted, as given).

    * ``duration``: how long each instance lasts in the simulator (virtual seconds; None:
      the simulator's default);
    * ``ports``: the ports each instance asks, a YAML flow mapping (``"{ssh: 1, nccl: 2}"``);
    * ``role_keys``: more keys of the role, a YAML line each (``"completion: {minFailedInstances: 2}"``);
    * ``role_gangmaster``: more keys of the role's ``gangmaster`` section, flow entries
      (``"failOnAttempts: [1], failInstance: 2"``, ``"nodeLabel: ib"``);
    * ``retry``: the job's ``jobRetryCount`` (None: not written);
    * ``job_gangmaster``: the job's ``gangmaster`` section, flow entries (``"priority: 5, attempts: 1"``).
    """
    commands = [command] if isinstance(command, str) else list(command)
    simulated = f"simulatedDurationSeconds: {duration}" if duration is not None else ""
    own = ", ".join(k for k in (simulated, role_gangmaster) if k)
    lines = ["protocolVersion: 2", f"name: {name}", "type: job",
             *([f"jobRetryCount: {retry}"] if retry is not None else []),
             "taskRoles:", "  worker:", f"    instances: {instances}",
             *(f"    {key}" for key in role_keys),
             f"    resourcePerInstance: {{cpu: 1, memoryMB: 1024, gpu: {gpus}{f', ports: {ports}' if ports else ''}}}",
             f"    commands: [{', '.join(json.dumps(c) for c in commands)}]",
             *([f"    gangmaster: {{{own}}}"] if own else []),
             *([f"gangmaster: {{{job_gangmaster}}}"] if job_gangmaster else [])]
    return "\n".join(lines) + "\n"

