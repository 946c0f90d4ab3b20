"""``gangmaster diagnose --snapshot`` on a real cluster's snapshot says which running jobs a
waiting gang would preempt under that engine's rules (tools/snapshots/preemption_rules.py),
chosen as gangmaster's RM chooses (the fewest GPU-hours of lost work first, each needed),
and says plainly when the engine's preemption is off or unknown (issue 30).

The fixtures (tests/fixtures/snapshots/): three 8-GPU machines, each held whole by one job.
Kubernetes: research/a-sweep (priority 100, running 6 h), research/b-finetune (100, 20 min),
prod/serving (100,000, 1 h). YARN: a-sweep (6 h) and b-finetune (20 min) in queue
root.default at priority 1, nightly-etl in root.batch at 0; its scheduler answer has
intra-queue preemption on for both queues."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gangmaster.tools.cli import main
from gangmaster.tools.snapshots import load_snapshot
from gangmaster.tools.snapshots.model import JobStanding

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
K8S = [FIXTURES / "k8s-priority-nodes.json", FIXTURES / "k8s-priority-pods.json"]
YARN = [FIXTURES / f"yarn-priority-{kind}.json" for kind in ("nodes", "apps", "containers", "scheduler")]
SLURM = [FIXTURES / "slurm-24.05-scontrol-nodes.json", FIXTURES / "slurm-24.05-squeue.json"]
TAKEN = "1796126400"   # 2026-12-01T12:00:00Z, when the Kubernetes pods' start times were written

K8S_ON = "its preemption is on (the scheduler's default, DefaultPreemption; a pod listing cannot show it switched off)"
YARN_ON = "its preemption is on (intra-queue preemption on queue root.default)"

CASES = {
    # (files, --priority, workers x 4 GPUs, the line): one worker needs one machine
    "Kubernetes: the lower-priority job that lost least, not the first blocking one": (
        K8S, 1000, 1, f"Kubernetes would preempt job research/b-finetune (priority 100, 8 GPUs, 2.8 GPU-h of work); "
                      f"{K8S_ON}"),
    "Kubernetes: two machines, both research jobs (serving outranks the gang)": (
        K8S, 1000, 2, "Kubernetes would preempt job research/b-finetune (priority 100, 8 GPUs, 2.8 GPU-h of work), "
                      f"job research/a-sweep (priority 100, 8 GPUs, 48.1 GPU-h of work); {K8S_ON}"),
    "Kubernetes: three machines would take serving too: nothing": (
        K8S, 1000, 3, "Kubernetes would preempt nothing (no lower-priority jobs whose preemption makes room); "
                      f"{K8S_ON}"),
    "Kubernetes: the job's own priority (0) is below every pod's": (
        K8S, None, 1, "Kubernetes would preempt nothing (no lower-priority jobs whose preemption makes room); "
                      f"{K8S_ON}"),
    "YARN: within queue default only, the one that lost least": (
        YARN, 5, 1, f"YARN would preempt job b-finetune (priority 1, 8 GPUs, 2.8 GPU-h of work); {YARN_ON}"),
    "YARN: nightly-etl of queue batch, though of a lower priority, is not YARN's to preempt for priority": (
        YARN, 5, 3, f"YARN would preempt nothing (no lower-priority jobs whose preemption makes room); {YARN_ON}"),
    "YARN without its scheduler answer: unknown, and whom it would preempt if on": (
        YARN[:3], 5, 1, "YARN's preemption is unknown (no /ws/v1/cluster/scheduler answer in the snapshot says whether "
                        "queue default preempts): if it is on, it would preempt job b-finetune (priority 1, 8 GPUs, "
                        "2.8 GPU-h of work)"),
    "Slurm: it preempts by partition tier or QOS, which squeue does not carry": (
        SLURM, None, 3, "Slurm's preemption is unknown (it preempts by partition PriorityTier or QOS as PreemptType "
                        "says (scontrol show config), never by a job's priority, and squeue's JSON carries neither): "
                        "whom it would preempt cannot be told"),
}


def _job(tmp_path: Path, workers: int) -> Path:
    path = tmp_path / "urgent.yaml"
    path.write_text(f"""
protocolVersion: 2
name: urgent
type: job
taskRoles:
  worker:
    instances: {workers}
    resourcePerInstance: {{cpu: 8, memoryMB: 32768, gpu: 4}}
    commands: ["train"]
    gangmaster: {{maxInstancesPerNode: 1}}
""")
    return path


def _diagnose(capsys, tmp_path, files, priority, workers) -> str:
    argv = ["diagnose", str(_job(tmp_path, workers)), "--snapshot", *map(str, files), "--snapshot-time", TAKEN,
            *(["--priority", str(priority)] if priority is not None else [])]
    assert main(argv) == 1   # the gang cannot start now
    return capsys.readouterr().out


@pytest.mark.parametrize("files, priority, workers, line", CASES.values(), ids=list(CASES))
def test_a_snapshot_diagnosis_says_whom_the_engine_would_preempt(capsys, tmp_path, files, priority, workers, line):
    assert f"  {line}" in _diagnose(capsys, tmp_path, files, priority, workers).splitlines()


def test_with_intra_queue_preemption_off_it_says_so_and_whom_it_would_preempt_were_it_on(capsys, tmp_path):
    answer = json.loads(YARN[3].read_text())
    for queue in answer["scheduler"]["schedulerInfo"]["queues"]["queue"]:
        queue["intraQueuePreemptionDisabled"] = True   # (what the RM says when its monitor is off)
    off = tmp_path / "scheduler.json"
    off.write_text(json.dumps(answer))
    assert main(["diagnose", str(_job(tmp_path, 1)), "--snapshot", *map(str, YARN[:3]), str(off), "--priority", "5",
                 "--json"]) == 1
    gang = json.loads(capsys.readouterr().out)["gangs"]["worker"]
    assert gang["preemption"] == {"engine": "YARN", "state": "off", "why": "intraQueuePreemptionDisabled on queue "
                                                                         "root.default"}
    assert [v["job"] for v in gang["preempts"]] == ["b-finetune"]


def test_priority_is_refused_without_a_snapshot(capsys, tmp_path):
    assert main(["diagnose", str(_job(tmp_path, 1)), "--priority", "5"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("gangmaster: --priority: expected it only with")


STANDINGS = [
    # (files, the engine, its preemption state, what is read of each running job)
    (K8S, "Kubernetes", "on", {"research/a-sweep": JobStanding(100, "", 6 * 3600.0),
                               "research/b-finetune": JobStanding(100, "", 1200.0),
                               "prod/serving": JobStanding(100_000, "", 3600.0)}),
    (YARN, "YARN", "on", {"a-sweep": JobStanding(1, "root.default", 6 * 3600.0),
                          "b-finetune": JobStanding(1, "root.default", 1200.0),
                          "nightly-etl": JobStanding(0, "root.batch", 1800.0)}),
    # a real Hadoop 3.4.2 RM (its preemption monitor off): intra-queue preemption disabled on root.default
    ([FIXTURES.parent / "yarn" / f"rest-{kind}-running-3.4.2.json" for kind in ("nodes", "apps", "scheduler")],
     "YARN", "off", {"sleepy": JobStanding(-1, "root.default", 9.845)}),
    # Slurm 24.05 wraps its numbers ({"set": true, "number": N}); the job started 714,665 s before
    (SLURM, "Slurm", "unknown", {"llm-finetune": JobStanding(4294901700, "gpu", 714665.0)}),
]


@pytest.mark.parametrize("files, engine, state, standing", STANDINGS, ids=[row[0][0].name for row in STANDINGS])
def test_each_reader_keeps_the_running_jobs_priorities_and_its_engines_preemption(files, engine, state, standing):
    snapshot = load_snapshot(files, taken_at=float(TAKEN))
    assert (snapshot.preemption.engine, snapshot.preemption.state) == (engine, state)
    assert snapshot.standing == standing
