"""Job files the end-to-end tests write: one role of 1-GPU instances."""
from __future__ import annotations


def one_role_job(name: str, instances: int, *, command: str = "train", duration: float | None = None) -> str:
    """An OpenPAI v2 job of ``instances`` workers, each 1 vcore, 1 GiB and 1 GPU, running
    ``command``; ``duration``: how long each lasts in the simulator (virtual seconds)."""
    simulated = f"\n    gangmaster: {{simulatedDurationSeconds: {duration}}}" if duration is not None else ""
    return f"""
protocolVersion: 2
name: {name}
type: job
taskRoles:
  worker:
    instances: {instances}
    resourcePerInstance: {{cpu: 1, memoryMB: 1024, gpu: 1}}
    commands: [{command}]{simulated}
"""
