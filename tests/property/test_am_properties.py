"""Invariants of the AM on the simulator, over random clusters, jobs, failures and
scheduling modes: nothing double-booked at any moment, every gang attempt starts
whole or not at all, no task ever runs twice at once, gangs that fit alone all
finish, and the same inputs give the same run."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.protocol.rm_protocol import ContainerState
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.queues import Queue
from job_texts import one_role_job

PORTS = PortRanges.parse("20000-20009")


@st.composite
def scenarios(draw):
    gpus = draw(st.sampled_from([2, 4, 8]))
    nodes = draw(st.integers(2, 5))
    jobs = []
    for k in range(draw(st.integers(1, 3))):
        instances = draw(st.integers(1, 6))
        per_task = draw(st.integers(0, gpus))
        retry = draw(st.integers(0, 2))
        fail = draw(st.sets(st.integers(1, retry + 1)))
        jobs.append(dict(name=f"j{k}", instances=instances, gpus=per_task, fail=sorted(fail),
                         duration=draw(st.integers(5, 80)), retry=retry))
    interval = draw(st.sampled_from([None, 1.0]))
    own_queues = draw(st.booleans())
    return gpus, nodes, jobs, interval, own_queues


def job_text(j) -> str:
    fail = f"failOnAttempts: {j['fail']}, failInstance: 0" if j["fail"] else ""
    return one_role_job(j["name"], j["instances"], gpus=j["gpus"], ports="{p: 1}", duration=j["duration"],
                        role_gangmaster=fail, retry=j["retry"])


def simulate(gpus, nodes, jobs, interval, own_queues, work: Path):
    specs = [NodeSpec(f"n{i}", f"r{i % 2}", frozenset(), "V100", None, 65536, 16, gpus, PORTS) for i in range(nodes)]
    queues = [Queue(f"q{k}") for k in range(len(jobs))] if own_queues else None
    settings = AMSettings(hold_timeout_s=30, release_backoff_s=5, max_virtual_time_s=20000)
    runs = SimulatedRuns(specs, settings, queues=queues, scheduling_interval_s=interval)
    core = runs.sim.core
    violations: list[str] = []

    def check() -> None:
        core.check_invariants()                       # no node, GPU or port double-booked; free + used = capacity
        running = Counter()
        for rec in core.containers.values():
            if rec.state is ContainerState.RUNNING and rec.launch is not None:
                env = rec.launch.env_dict
                running[(rec.app_id, env["PAI_CURRENT_TASK_ROLE_NAME"],
                         env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"])] += 1
        violations.extend(f"{key} runs {n} times" for key, n in running.items() if n > 1)

    runs.sim.every(0.5, check, start=0.25)
    for k, j in enumerate(jobs):
        runs.submit(parse_job(job_text(j)), work / j["name"], queues[k].name if queues else "default")
    done = runs.run()
    core.check_invariants()
    return runs, done, violations


# A gang that released its containers (hold timeout) was taken for stuck as soon as its
# backoff ended, before it could place again: the reason it waited still described the
# containers it had given back.
RELEASED_THEN_BACKED_OFF = (8, 3, [
    dict(name="j0", instances=3, gpus=2, fail=[], duration=20, retry=0),
    dict(name="j1", instances=1, gpus=1, fail=[], duration=5, retry=0),
    dict(name="j2", instances=5, gpus=4, fail=[], duration=5, retry=0)], 1.0, True)


@given(scenarios())
@example(RELEASED_THEN_BACKED_OFF)
def test_am_invariants(tmp_path_factory, scenario):
    gpus, nodes, jobs, interval, own_queues = scenario
    work = tmp_path_factory.mktemp("am")
    runs, done, violations = simulate(gpus, nodes, jobs, interval, own_queues, work)
    assert not violations
    assert done, {r.job.name: r.am.why_waiting() for r in runs.runs}   # every gang that fits alone finishes
    for run, j in zip(runs.runs, jobs):
        fits = j["gpus"] == 0 or (gpus // j["gpus"]) * nodes >= j["instances"]
        fits = fits and j["instances"] <= nodes * 10       # ten ports per node, one per task
        if not fits:
            assert run.outcome == "failed" and "even on the empty cluster" in run.am.reason
            continue
        history = run.am.history()
        for attempt in history:
            if attempt.started_at is not None:                      # started whole, in one heartbeat
                assert len(attempt.tasks) == j["instances"]
                assert {t.started_at for t in attempt.tasks} == {attempt.started_at}
            else:
                assert attempt.tasks == []
        failing = set(j["fail"])
        attempts = j["retry"] + 1
        expect_success = any(a not in failing for a in range(1, attempts + 1))
        assert run.outcome == ("succeeded" if expect_success else "failed")
        first_good = min((a for a in range(1, attempts + 1) if a not in failing), default=attempts)
        assert [a.attempt for a in history] == list(range(1, first_good + 1))


@given(scenarios())
@settings(max_examples=30)   # two whole simulations per example; the invariants above take the hundred
def test_same_inputs_same_run(tmp_path_factory, scenario):
    def once():
        runs, _, _ = simulate(*scenario, tmp_path_factory.mktemp("am"))
        return [[(a.attempt, a.outcome, a.started_at, [(t.host, t.gpus, t.ports) for t in a.tasks])
                 for a in r.am.history()] for r in runs.runs]
    assert once() == once()


@given(st.integers(1, 8), st.booleans())
def test_a_gang_started_counts_its_tasks_as_one_launched_from_a_journal(count, refused):
    """GangRun.started (the AM's own launch: all running but a refused last one) counts as
    GangRun.launched, which counts the tasks one by one."""
    from gangmaster.am.core.gang_run import GangRun
    from gangmaster.am.core.lifecycle import ROLE_RUNNING, AttemptRecord, TaskRecord, TaskState

    def tasks():
        made = [TaskRecord("w", i, i, f"c{i}", "n0", (), {}, 1.0) for i in range(count)]
        if refused:
            made[-1].state = TaskState.FAILED
        return made

    started, launched = (GangRun("w", (), 1, ROLE_RUNNING, AttemptRecord("w", 1, 0.0)) for _ in range(2))
    started.started(tasks(), None, 1.0)
    launched.launched(tasks(), 1.0)
    assert (started.succeeded, started.failed, started.running) == \
        (launched.succeeded, launched.failed, launched.running)
    assert started.record.tasks is started.tasks and len(started.tasks) == count
