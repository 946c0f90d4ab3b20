"""What a job declares to the RM when submitted (``declared_gang``): its largest gang, role by
role, and how long it is declared to run: the job's ``expectedDurationSeconds``, else its
roles' longest ``simulatedDurationSeconds``, else unknown (a live job's real commands)."""
from __future__ import annotations

import pytest

from gangmaster.am.core.reservation_plan import declared_gang, gang_instances
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.protocol.rm_protocol import GangRole


def job(job_keys: str = "", worker_keys: str = "", ps_keys: str = "") -> str:
    return f"""
protocolVersion: 2
name: j
type: job
taskRoles:
  ps:
    instances: 1
    resourcePerInstance: {{cpu: 2, memoryMB: 4096, gpu: 0}}
    commands: ["serve"]
    gangmaster: {{{ps_keys}}}
  worker:
    instances: 3
    resourcePerInstance: {{cpu: 4, memoryMB: 2048, gpu: 2}}
    commands: ["train"]
    gangmaster: {{maxInstancesPerNode: 2, requestRatio: 0.5{", " + worker_keys if worker_keys else ""}}}
gangmaster: {{{job_keys}}}
"""


GANG = (GangRole("ps", 1, gpus=0, vcores=2.0, memory_mb=4096),
        GangRole("worker", 3, gpus=2, vcores=2.0, memory_mb=2048, max_instances_per_node=2))


@pytest.mark.parametrize("job_keys, worker_keys, ps_keys, duration_s", [
    ("", "", "", None),                                            # a live job: unknown
    ("expectedDurationSeconds: 3600", "", "", 3600.0),             # declared for the job
    ("", "simulatedDurationSeconds: 60", "simulatedDurationSeconds: 90", 90.0),   # simulated: the longest
    ("", "simulatedDurationSeconds: 60", "", None),                # a role without one: unknown
    ("expectedDurationSeconds: 0", "simulatedDurationSeconds: 60", "simulatedDurationSeconds: 90", 0.0),
])
def test_the_declared_gang_and_duration(job_keys, worker_keys, ps_keys, duration_s):
    gang, declared = declared_gang(parse_job(job(job_keys, worker_keys, ps_keys)))
    assert gang == GANG and declared == duration_s
    assert gang_instances(gang) == [(2, "worker", 2)] * 3   # what a reserving queue plans: GPU instances


def test_the_largest_gang_is_declared():
    text = job("gangs: [[ps], [worker]]")
    assert declared_gang(parse_job(text))[0] == GANG[1:]
