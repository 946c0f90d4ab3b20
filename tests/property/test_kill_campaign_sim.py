"""The kill campaign in virtual time, where kills are cheap: many runs of a gang
job, each with running tasks killed (``fail_container``, exit 137) at random
moments. Every kill's completion is recorded once, as a failure of the attempt
it hit; no completion is recorded twice; exactly the attempts that were hit
fail; the job succeeds exactly when attempts remain, with every task of its last
attempt completed once; and the RM's books balance with nothing left running."""
from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.core.journal import JOURNAL_FILE, read_records, task_endings
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.protocol.rm_protocol import ContainerState
from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
from gangmaster.tools.job_runner import SimulatedRuns
from job_texts import one_role_job

DURATION_S = 60
SPECS = load_cluster_specs(default_cluster_path())


def job_text(instances: int, retry: int) -> str:
    return one_role_job("campaign", instances, duration=DURATION_S, retry=retry)


@st.composite
def campaigns(draw):
    instances = draw(st.integers(1, 4))
    retry = draw(st.integers(0, 4))
    horizon = (retry + 2) * DURATION_S
    kills = draw(st.lists(st.floats(0, horizon, allow_nan=False), max_size=8))
    return instances, retry, sorted(kills), draw(st.integers(0, 2**32 - 1))


def run_campaign(instances: int, retry: int, kill_times: list[float], seed: int, work):
    runs = SimulatedRuns(SPECS, AMSettings(max_virtual_time_s=100_000))
    run = runs.submit(parse_job(job_text(instances, retry)), work)
    core, rng = runs.sim.core, random.Random(seed)
    hits: list[str] = []

    def kill_a_random_task() -> None:
        live = sorted(c.container_id for c in core.containers.values()
                      if c.app_id == run.app_id and c.state is ContainerState.RUNNING)
        if live:
            hits.append(rng.choice(live))
            core.fail_container(hits[-1], 137, "killed by the campaign")

    for t in kill_times:
        runs.sim.loop.call_at(t, kill_a_random_task)
    done = runs.run()
    return runs, run, done, hits


@settings(max_examples=60)
@given(campaigns())
def test_random_kills_lose_no_completion_and_count_none_twice(tmp_path_factory, campaign):
    instances, retry, kill_times, seed = campaign
    work = tmp_path_factory.mktemp("campaign")
    runs, run, done, hits = run_campaign(instances, retry, kill_times, seed, work)
    assert done

    records = read_records(work / JOURNAL_FILE)
    where = {t["container_id"]: (r["attempt"], t["index"])          # container -> (attempt, task index)
             for r in records if r["kind"] == "launched" for t in r["tasks"]}
    finished = Counter((r["attempt"], r["index"]) for r in task_endings(records))
    states = {(r["attempt"], r["index"]): (r["state"], r["exit_status"])
              for r in task_endings(records)}
    assert not finished or max(finished.values()) == 1, finished                    # none counted twice
    for cid in hits:                                                                # none lost
        assert states[where[cid]] == ("failed", 137), (cid, where[cid])

    hit_attempts = {where[cid][0] for cid in hits}
    ended = [(r["record"]["attempt"], r["record"]["outcome"]) for r in records if r["kind"] == "attempt_ended"]
    failed = [a for a, outcome in ended if outcome == "failed"]
    assert sorted(failed) == sorted(hit_attempts)
    if len(hit_attempts) <= retry:
        assert run.outcome == "succeeded"
        last = ended[-1][0]
        assert ended[-1] == (last, "succeeded") and last == len(hit_attempts) + 1
        assert [states.get((last, i)) for i in range(instances)] == [("succeeded", 0)] * instances
    else:
        assert run.outcome == "failed" and len(failed) == retry + 1

    core = runs.sim.core
    core.check_invariants()                                     # free + used = capacity on every node
    assert not [c for c in core.containers.values() if not c.state.finished]
