"""`gangmaster diagnose` on story 3's two incidents (exact numbers), its exit codes and
JSON, a snapshot booked on the simulator, and the live diagnosis of a waiting gang:
the AM's log, /why, `gangmaster why`, the gauges, and --max-wait."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.request import urlopen

import pytest
from in_process import gangmaster
from task_procs import wait_until

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import load_job, parse_job
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.diagnose_cmd import diagnose_job
from gangmaster.tools.job_runner import SimulatedRuns

from job_texts import one_role_job
from gangmaster.tools.rmsim.scenario import Scenario

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
CLUSTER = CONF / "clusters" / "story3-incidents.yaml"
JOB = CONF / "jobs" / "story3-ps.yaml"


@pytest.fixture(scope="module")
def story3():
    return load_cluster_specs(CLUSTER), load_job(JOB)


def test_incident_a_32_machines_blacklisted_overnight(story3, tmp_path):
    specs, job = story3
    scenario = Scenario.load(CONF / "scenarios" / "story3-blacklisted.yaml", {s.host for s in specs})
    d = diagnose_job(job, specs, tmp_path, AMSettings(), SelectionSettings(), scenario=scenario)
    assert (d["gang_can_start"], d["fits_empty_cluster"], d["healthy_machines"]) == (False, True, 2998)
    server = d["roles"]["server"]
    assert (server["needed"], server["placeable"], server["shortfall"]) == (3000, 2998, 2)
    assert server["asked"] == {"vcores": 7.5, "memoryMB": 16384, "gpus": 0}
    assert [(r["code"], r["count"], r["waiting_helps"]) for r in server["reasons"]] == [
        ("unhealthy", 32, False), ("role-cap-reached", 2998, False)]
    assert [(r["placeable"], r["shortfall"]) for name, r in d["roles"].items() if name != "server"] == [
        (1, 0), (3000, 0)]
    assert d["roles"]["worker"]["asked"]["vcores"] == pytest.approx(5.6)
    assert d["blocking_jobs"] == []
    assert d["hint"] == ("2 more machine(s) like s10-0001, or restore 2 of the 32 unhealthy/blacklisted machines "
                         "(s10-0000, s10-0100)")


def test_incident_b_another_all_or_nothing_job_left_90_machines_short_of_cpu(story3, tmp_path):
    specs, job = story3
    d = diagnose_job(job, specs, tmp_path, AMSettings(), SelectionSettings(),
                     after=[load_job(CONF / "jobs" / "story3-xlibmpi.yaml")])
    assert (d["gang_can_start"], d["fits_empty_cluster"], d["healthy_machines"]) == (False, True, 3030)
    server = d["roles"]["server"]
    assert (server["needed"], server["placeable"], server["shortfall"]) == (3000, 2940, 60)
    assert [(r["code"], r["count"], r["waiting_helps"]) for r in server["reasons"]] == [
        ("role-cap-reached", 2940, False), ("vcores-exhausted", 90, True)]
    assert "need 7.5, most free 7" in server["reasons"][1]["detail"]
    (blocking,) = d["blocking_jobs"]
    assert (blocking["job"], blocking["machines"], blocking["holds"]) == ("xlibmpi", 90, {"vcores": 2250})
    # xlibmpi started at 1 s and lasts 7,200 s; JOB was diagnosed after waiting 60 s from 1 s
    assert blocking["expected_end_s"] == pytest.approx(7201 - 61, abs=2)
    assert d["hint"].startswith("60 more machine(s) like s10-0000, or when job xlibmpi ends (expected to end in ")
    assert d["hint"].endswith("90 machine(s) get 7.0 → 32.0 free vcores")


def test_the_command_prints_json_and_exits_1_when_the_gang_cannot_start():
    result = gangmaster("diagnose", JOB, "--cluster", CLUSTER, "--scenario", CONF / "scenarios" /
                        "story3-blacklisted.yaml", "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert {"job", "gang_can_start", "fits_empty_cluster", "healthy_machines", "roles", "blocking_jobs",
            "hint"} <= set(data)
    assert data["roles"]["server"]["shortfall"] == 2


def test_the_command_exits_0_when_the_gang_can_start_and_2_on_bad_input(tmp_path):
    ok = gangmaster("diagnose", CONF / "jobs" / "mpi-allreduce.yaml")
    assert ok.returncode == 0, ok.stderr
    assert "can start now" in ok.stdout and "placeable 4, shortfall 0" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("protocolVersion: 2\nname: x\ntaskRoles: {w: {instances: -1}}\n")
    result = gangmaster("diagnose", bad)
    assert result.returncode == 2 and "bad.yaml" in result.stderr
    result = gangmaster("diagnose", CONF / "jobs" / "mpi-allreduce.yaml", "--wait", "soon")
    assert result.returncode == 2



@pytest.mark.parametrize("args, message", [
    (["--snapshot", "{empty}"], "{empty}: nodes: expected at least one node (read as slurm JSON"),
    (["--snapshot-time", "1795415335"], "--snapshot-time: expected it only with --snapshot"),
])
def test_a_snapshot_that_cannot_be_diagnosed_against_exits_2_with_one_line(tmp_path, args, message):
    empty = tmp_path / "EMPTY.json"
    empty.write_text(json.dumps({**json.loads((CONF / "snapshots" / "slurm" / "sinfo.json").read_text()), "nodes": []}))
    result = gangmaster("diagnose", CONF / "jobs" / "snapshot-8gpu-pair.yaml",
                        *(arg.format(empty=empty) for arg in args))
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.startswith(f"gangmaster: {message.format(empty=empty)}") and result.stderr.count("\n") == 1
    if "--snapshot" in args:          # `gangmaster snapshot` reads it the same way
        shown = gangmaster("snapshot", empty)
        assert (shown.returncode, shown.stderr) == (2, result.stderr)

# ---------------------------------------------------------------- a snapshot, booked on the simulator
@dataclass
class _Allocation:   # the snapshot helper's RunningAllocation, as its interface gives it
    job: str
    host: str
    vcores: float
    memory_mb: int
    gpus: int
    expected_end_s: float | None


@dataclass
class _Snapshot:
    format: str
    specs: list
    unhealthy: dict
    running: list
    preemption: None = None   # (no engine's rules: nothing said of preemption)


def test_a_snapshot_s_unhealthy_nodes_and_running_jobs_are_what_the_gang_is_diagnosed_against(tmp_path):
    ports = PortRanges.parse("20000-20099")
    specs = [NodeSpec(f"node-{i}", "r0", frozenset(), "A100", None, 65536, 16, 4, ports) for i in range(4)]
    snapshot = _Snapshot("kubernetes", specs, {"node-3": "NotReady"},
                         [_Allocation("team-a/etl", "node-0", 2, 1024, 4, 1800.0),
                          _Allocation("team-a/etl", "node-1", 2, 1024, 3, None)])
    job = parse_job(one_role_job("train", 3, gpus=2, role_gangmaster="maxInstancesPerNode: 1"))
    d = diagnose_job(job, specs, tmp_path, AMSettings(), SelectionSettings(), snapshot=snapshot, wait_s=5)
    worker = d["roles"]["worker"]
    assert (worker["placeable"], worker["shortfall"], d["healthy_machines"]) == (1, 2, 3)
    assert {(r["code"], r["count"], r["waiting_helps"]) for r in worker["reasons"]} == {
        ("unhealthy", 1, False), ("role-cap-reached", 1, False), ("gpus-exhausted", 2, True)}
    assert [(b["job"], b["machines"], b["holds"]) for b in d["blocking_jobs"]] == [("team-a/etl", 2, {"gpus": 7})]
    assert d["blocking_jobs"][0]["expected_end_s"] is None      # one of its allocations has no known end


# ---------------------------------------------------------------- live, from the AM
_SMALL = [NodeSpec(f"n{i}", "rack-0", frozenset(), "V100", None, 65536, 16, 4, PortRanges.parse("20000-20099"))
          for i in range(2)]


def test_a_waiting_gang_is_diagnosed_once_in_the_log_on_why_and_in_the_gauges(tmp_path):
    lines: list[str] = []
    runs = SimulatedRuns(_SMALL, AMSettings(metrics_port=0, explain_after_s=10), echo=lines.append)
    try:
        runs.submit(parse_job(one_role_job("holder", 8, duration=600)), tmp_path / "a")
        runs.sim.run_until(2)
        runs.submit(parse_job(one_role_job("waiter", 4, duration=60)), tmp_path / "b")
        runs.sim.run_until(300)
        why = json.loads(urlopen(runs.metrics.why_url, timeout=5).read())
        metrics = urlopen(runs.metrics_url, timeout=5).read().decode()
        address = runs.metrics_url.split("/")[2]
        printed = gangmaster("why", "--address", address)
    finally:
        runs.close()
    said = [line for line in lines if "why it waits" in line]
    assert len(said) == 1 and "after 10s" in said[0]         # once: nothing changed in 300 s
    holder, waiter = why["jobs"]
    assert holder["waiting"] == {}
    d = waiter["waiting"]["worker"]["diagnosis"]
    assert (d["roles"]["worker"]["placeable"], d["roles"]["worker"]["shortfall"]) == (0, 4)
    assert d["roles"]["worker"]["reasons"] == [{"code": "gpus-exhausted", "count": 2, "waiting_helps": True,
                                                "detail": "2 machine(s) with GPUs exhausted by other jobs "
                                                          "(need 1, most free 0)"}]
    # holder's tasks started at 1 s for 600 s; waiter, waiting since 2 s, was diagnosed at 12 s
    assert (d["blocking_jobs"][0]["job"], d["blocking_jobs"][0]["expected_end_s"]) == ("holder", 589)
    assert 'gangmaster_gang_shortfall{app_id="app_0002",job_name="waiter",role="worker"} 4.0' in metrics
    assert ('gangmaster_gang_blocked_nodes{app_id="app_0002",job_name="waiter",reason="gpus-exhausted",'
            'role="worker"} 2.0') in metrics
    assert printed.returncode == 1, printed.stderr
    assert "job waiter (app_0002): gang worker has waited" in printed.stdout
    assert "gpus-exhausted: 2 machine(s) with GPUs exhausted by other jobs" in printed.stdout


def test_the_gauges_go_back_to_zero_when_the_gang_starts(tmp_path):
    runs = SimulatedRuns(_SMALL, AMSettings(explain_after_s=10))
    try:
        runs.submit(parse_job(one_role_job("holder", 8, duration=100)), tmp_path / "a")
        runs.sim.run_until(2)
        waiter = runs.submit(parse_job(one_role_job("waiter", 4, duration=60)), tmp_path / "b")
        runs.sim.run_until(50)
        assert waiter.metrics.registry.get_sample_value("gangmaster_gang_shortfall", {"role": "worker"}) == 4
        assert runs.run()
    finally:
        runs.close()
    assert waiter.outcome == "succeeded"
    assert waiter.metrics.registry.get_sample_value("gangmaster_gang_shortfall", {"role": "worker"}) == 0
    assert waiter.metrics.registry.get_sample_value(
        "gangmaster_gang_blocked_nodes", {"role": "worker", "reason": "gpus-exhausted"}) is None


def test_max_wait_fails_the_job_with_the_diagnosis(tmp_path):
    runs = SimulatedRuns(_SMALL, AMSettings(max_wait_s=120))
    runs.submit(parse_job(one_role_job("holder", 8, duration=3600)), tmp_path / "a")
    runs.sim.run_until(2)
    waiter = runs.submit(parse_job(one_role_job("waiter", 4, duration=60)), tmp_path / "b")
    runs.run()
    assert waiter.outcome == "failed"
    assert waiter.am.reason.startswith("gang worker waited 120s, the limit (am.max_wait_s / --max-wait): "
                                       "worker 0/4 placeable, 4 short (2 machine(s) with GPUs exhausted by other "
                                       "jobs (need 1, most free 0)); to unblock: ")
    # holder's tasks end at 3,601 s; the job ends at 122 s (submitted at 2 s, waited 120 s)
    assert ("when job holder ends (expected to end in 57m 59s), 2 machine(s) get 0.0 → 4.0 free GPUs"
            in waiter.am.reason)


def test_a_simulated_run_without_max_wait_waits_a_virtual_day_at_most():
    assert AMSettings().max_wait_s is None
    assert AMSettings().for_virtual_time().max_wait_s == 86400
    assert AMSettings(max_wait_s=5).for_virtual_time().max_wait_s == 5


def test_the_diagnosis_is_said_again_when_it_changes(tmp_path):
    scenario = Scenario.parse("events: [{at: 0, do: mark_unhealthy, host: n0}, {at: 0, do: mark_unhealthy, host: n1},"
                              " {at: 100, do: restore_node, host: n0}]")
    lines: list[str] = []
    runs = SimulatedRuns(_SMALL, AMSettings(explain_after_s=10), scenario=scenario, echo=lines.append)
    run = runs.submit(parse_job(one_role_job("waiter", 8, duration=60)), tmp_path)
    runs.run()
    said = [k for k, line in enumerate(lines) if "why it waits" in line]
    assert len(said) == 2 and "(after 10s)" in lines[said[0]] and "(changed)" in lines[said[1]]
    assert "worker: needed 8, placeable 0, shortfall 8" in lines[said[0] + 2]
    assert "worker: needed 8, placeable 4, shortfall 4" in lines[said[1] + 2]
    assert "gpus-held-by-gang: 1 machine(s) whose GPUs the gang's own instances take" in "\n".join(lines)
    # then nothing is left to change it: the job fails at once, with the diagnosis
    assert run.outcome == "failed" and "worker 4/8 placeable, 4 short" in run.am.reason
    assert runs.sim.now() < 200


def test_what_of_a_snapshot_does_not_add_up_is_booked_as_far_as_it_fits_and_said(tmp_path):
    ports = PortRanges.parse("20000-20099")
    specs = [NodeSpec(f"node-{i}", "r0", frozenset(), "A100", None, 65536, 16, 4, ports) for i in range(2)]
    snapshot = _Snapshot("yarn", specs, {"gone-9": "LOST"},
                         [_Allocation("big", "node-0", 20, 1024, 0, None),        # more vcores than the node has
                          _Allocation("elsewhere", "node-7", 1, 1024, 0, None)])
    job = parse_job(one_role_job("w", 5, duration=60))
    d = diagnose_job(job, specs, tmp_path, AMSettings(), SelectionSettings(), snapshot=snapshot, wait_s=5)
    assert d["warnings"] == [   # bookings first, then unhealthy marks (a drained node keeps what it runs)
        "big on node-0: 20 vcores, 1024 MB, 0 GPU(s) do not fit what is left of the host; booked 16, 1024, 0",
        "elsewhere runs on node-7, which is not among the snapshot's nodes: ignored",
        "unhealthy host gone-9 is not among the snapshot's nodes: ignored"]
    worker = d["roles"]["worker"]
    assert (worker["placeable"], worker["shortfall"]) == (4, 1)       # node-1 takes 4; node-0 is full
    assert [(r["code"], r["count"]) for r in worker["reasons"]] == [("vcores-exhausted", 1), ("gpus-held-by-gang", 1)]
    assert [(b["job"], b["holds"]) for b in d["blocking_jobs"]] == [("big", {"vcores": 16})]


def test_on_a_busy_cluster_a_waiting_gang_is_diagnosed_at_most_once_per_explain_after_s(tmp_path):
    runs = SimulatedRuns(_SMALL, AMSettings(explain_after_s=60))
    for k in range(4):   # four jobs of 2 GPUs each, ending 30 s apart: the waiter is placed again each time
        runs.submit(parse_job(one_role_job(f"holder{k}", 2, duration=100 + 30 * k)), tmp_path / f"h{k}")
    runs.sim.run_until(2)
    waiter = runs.submit(parse_job(one_role_job("waiter", 8, duration=60)), tmp_path / "w")
    assert runs.run() and waiter.outcome == "succeeded"
    sample = waiter.metrics.registry.get_sample_value
    placements = sample("gangmaster_selection_latency_seconds_count")
    diagnoses = sample("gangmaster_gang_diagnoses_total")
    started = waiter.am.history()[-1].started_at
    assert placements >= 5                                   # the first, one per job ending, the one that fits
    # first at 62 s, then at most once a minute (one per placement would be 4 here)
    assert 1 <= diagnoses <= 1 + (started - 62) // 60


def test_a_live_run_serves_why_while_its_gang_waits_on_another_job_s_processes(tmp_path):
    import time
    from gangmaster.am.core.journal import JOURNAL_FILE, read_records
    from gangmaster.tools.job_runner import LiveRuns

    def launched(work_dir: Path) -> bool:
        return any(r["kind"] == "launched" for r in read_records(work_dir / JOURNAL_FILE))

    runs = LiveRuns(_SMALL, tmp_path / "run", AMSettings(heartbeat_s=0.05, explain_after_s=0.2, metrics_port=0))
    try:
        runs.submit(parse_job(one_role_job("holder", 8, command="sleep 60", duration=60)),
                    tmp_path / "holder")
        # the holder's 8 tasks run (its journal says so) before the waiter asks
        wait_until(lambda: launched(tmp_path / "holder"), 30, "the holder's tasks to start")
        runs.submit(parse_job(one_role_job("waiter", 4, command="true", duration=60)),
                    tmp_path / "waiter")
        deadline, d = time.monotonic() + 30, None
        while d is None and time.monotonic() < deadline:
            time.sleep(0.1)
            jobs = json.loads(urlopen(runs.metrics.why_url, timeout=5).read())["jobs"]
            waiting = jobs[1]["waiting"].get("worker")
            d = waiting and waiting["diagnosis"]
    finally:
        runs.shutdown()
    assert d is not None, "no diagnosis was served within 30 s"
    assert (d["roles"]["worker"]["placeable"], d["roles"]["worker"]["shortfall"]) == (0, 4)
    assert [(b["job"], b["machines"], b["holds"], b["expected_end_s"]) for b in d["blocking_jobs"]] == [
        ("holder", 2, {"gpus": 8}, None)]                      # live processes: no known end


def test_why_says_when_the_address_does_not_answer():
    result = gangmaster("why", "--address", "127.0.0.1:1", "--timeout", "2")
    assert result.returncode == 2
    assert "http://127.0.0.1:1/why did not answer with a diagnosis" in result.stderr


def test_a_drained_node_keeps_what_it_runs_in_a_snapshot_diagnosis(tmp_path):
    """Slurm drains a node with jobs still on it: the jobs are booked there, then the node
    is marked unhealthy, so neither the booking nor the mark is lost."""
    ports = PortRanges.parse("20000-20099")
    specs = [NodeSpec(f"node-{i}", "r0", frozenset(), "A100", None, 65536, 16, 4, ports) for i in range(2)]
    snapshot = _Snapshot("slurm", specs, {"node-0": "DRAIN"}, [_Allocation("train", "node-0", 4, 1024, 2, 3600.0)])
    job = parse_job(one_role_job("w", 4, duration=60))
    d = diagnose_job(job, specs, tmp_path, AMSettings(), SelectionSettings(), snapshot=snapshot, wait_s=5)
    assert d["warnings"] == []
    assert d["healthy_machines"] == 1
    assert d["roles"]["worker"]["placeable"] == 4 and d["gang_can_start"]
