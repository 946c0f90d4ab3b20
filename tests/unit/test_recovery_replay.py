"""Recovery replays the journal's events through the gang's own transitions: a gang rebuilt
from what its observers wrote is the gang that wrote it, and an interrupted attempt that a
new run ends keeps what it lived (its releases and re-selections)."""
from gangmaster.am.core.acquisition import AcquisitionContext
from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.core.gang_events import JournalEvents
from gangmaster.am.core.gang_run import GangRun
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.am.core.journal import MemoryJournal, read_state
from gangmaster.am.core.lifecycle import TaskRecord, TaskState
from gangmaster.am.core.recovery import replay_gangs, resume

from job_texts import one_role_job

JOB = parse_job(one_role_job(instances=2, duration=30))


def lived(until: str) -> tuple[GangRun, MemoryJournal]:
    """A gang attempt driven through its transitions up to ``until`` (launched, ended), its
    events written by the journal's observer."""
    journal = MemoryJournal(now=lambda: 0.0)
    events = JournalEvents(journal)
    am_started = ("am_started", {"am_attempt": 1, "app_id": "app_0001", "job": JOB.name})
    journal.write(am_started[0], 0.0, **am_started[1])
    gang = GangRun.recorded("worker", JOB.gang_roles(0), 1, 0.0, [])
    gang.events = events
    events.attempt_began(gang, 0.0, True)
    gang.reselected(2)
    gang.released(["c9"], 3.0)
    tasks = [TaskRecord("worker", i, i, f"c{i}", "n0", (i,), {}, 5.0) for i in range(2)]
    gang.started(tasks, "token", 5.0)
    gang.task_ended(tasks[0], 0, "", 7.0)
    events.deciding(7.0)
    if until == "ended":
        gang.end_attempt("failed", "worker-1 exited with status 3", 8.0)
    return gang, journal


def test_a_gang_replayed_from_its_events_is_the_gang_that_wrote_them():
    for until in ("launched", "ended"):
        gang, journal = lived(until)
        replayed = replay_gangs(JOB, read_state(journal.records()))["worker"]
        assert replayed.launched and replayed.barrier_token == "token"
        assert replayed.gang.record == gang.record, until
        assert replayed.gang.history == gang.history, until
        assert (replayed.gang.running, replayed.gang.counts()) == (gang.running, gang.counts()), until


def test_a_resumed_run_ends_the_interrupted_attempt_with_what_it_lived():
    _gang, journal = lived("launched")
    new = MemoryJournal(now=lambda: 20.0)
    context = AcquisitionContext(AMSettings(), (0, JOB.name, "app_0002", 1), lambda line: None, JournalEvents(new),
                                 lambda s: None, 1)
    (taken,) = resume(JOB, read_state(journal.records()), context, lambda: 20.0, lambda line: None).gangs
    (interrupted,) = taken.gang.history
    assert (interrupted.outcome, interrupted.releases, interrupted.reselections) == ("stopped", 1, 2)
    assert [t.state for t in interrupted.tasks] == [TaskState.SUCCEEDED, TaskState.STOPPED]
    assert taken.gang.attempt == 2 and taken.gang.acquisition is not None
