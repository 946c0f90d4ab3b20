"""The AM's GPU gauges: whole GPUs and milli-GPU of shares its containers hold, beside each other."""
from pathlib import Path

from prometheus_client import generate_latest

from gangmaster.am.spec.jobspec import parse_job
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.job_runner import SimulatedRuns

CLUSTER = Path(__file__).resolve().parents[2] / "conf" / "clusters" / "shared-gpu.yaml"
JOB = """
protocolVersion: 2
name: mixed
type: job
taskRoles:
  notebook:
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 0}
    commands: ["true"]
    gangmaster: {gpuMilli: 300, simulatedDurationSeconds: 100}
  trainer:
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 2}
    commands: ["true"]
    gangmaster: {simulatedDurationSeconds: 50}
gangmaster:
  gangs: [[notebook], [trainer]]
"""


def gauges(run) -> dict[str, float]:
    text = generate_latest(run.metrics.registry).decode()
    return {name: float(line.split()[-1]) for line in text.splitlines()
            for name in ("gangmaster_allocated_gpus", "gangmaster_allocated_shared_gpus") if line.startswith(name + " ")}


def test_gpu_gauges_count_shares_as_fractions_of_a_gpu(tmp_path):
    runs = SimulatedRuns(load_cluster_specs(CLUSTER))
    run = runs.submit(parse_job(JOB, "mixed.yaml"), tmp_path)
    try:
        runs.sim.run_until(10)
        assert gauges(run) == {"gangmaster_allocated_gpus": 2.3, "gangmaster_allocated_shared_gpus": 0.3}
        runs.sim.run_until(80)    # the trainer has ended, the notebook runs on
        assert gauges(run) == {"gangmaster_allocated_gpus": 0.3, "gangmaster_allocated_shared_gpus": 0.3}
        assert runs.run() and run.outcome == "succeeded"
        assert gauges(run) == {"gangmaster_allocated_gpus": 0.0, "gangmaster_allocated_shared_gpus": 0.0}
    finally:
        runs.close()
