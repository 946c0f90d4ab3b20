"""A journal field may be a finished record (an ended attempt's AttemptRecord): the file
journal writes its dict at once, the memory journal only when read, and both read back
the same; anything else that JSON cannot hold is refused."""
import pytest

from gangmaster.am.core.journal import JOURNAL_FILE, Journal, MemoryJournal, NoJournal, read_records
from gangmaster.am.core.lifecycle import AttemptRecord, TaskRecord, TaskState


def ended_attempt() -> AttemptRecord:
    task = TaskRecord("worker", 0, 0, "c0", "n0", (1, 2), {"http": 20000}, 1.0, TaskState.SUCCEEDED, 0, "", 9.0)
    return AttemptRecord("worker", 1, 0.0, started_at=1.0, ended_at=9.0, outcome="succeeded", reason="done",
                         tasks=[task])


def test_both_journals_read_back_a_record_field_as_its_dict(tmp_path):
    clock = iter([5.0, 5.0]).__next__
    on_disk = Journal(tmp_path / JOURNAL_FILE, now=lambda: 5.0)
    in_memory = MemoryJournal(now=clock)
    for journal in (on_disk, in_memory):
        journal.write("attempt_ended", record=ended_attempt())
    on_disk.close()
    (written,) = read_records(tmp_path / JOURNAL_FILE)
    assert in_memory.records() == [written]
    assert written["record"] == ended_attempt().to_dict()
    assert AttemptRecord.from_dict(written["record"]) == ended_attempt()


def test_a_field_json_cannot_hold_is_refused_by_the_file_journal(tmp_path):
    journal = Journal(tmp_path / JOURNAL_FILE)
    with pytest.raises(TypeError, match="cannot hold a set"):
        journal.write("released", containers={"c1"})
    journal.close()


def test_an_empty_memory_journal_reads_no_records():
    assert MemoryJournal().records() == []


def test_a_journal_that_keeps_nothing_reads_no_records_and_closes():
    journal = NoJournal()
    journal.write("am_started", am_attempt=1, app_id="a", job="j")
    assert journal.keeps_nothing and journal.records() == []
    assert not journal.closed
    journal.close()
    assert journal.closed


def test_an_am_whose_journal_keeps_nothing_decides_as_one_that_keeps_every_record(monkeypatch):
    """The same replay (the engine's AMs given one kind of journal, then the other): every
    job's outcome, start, end and hosts, and the timeline, are the same; the memory
    journals hold every record, the others none."""
    from replay_helpers import cluster, synthetic

    from gangmaster.am.core.master import ApplicationMaster
    from gangmaster.tools.replay import engine

    def run(make_journal):
        journals = []

        class GivenJournal(ApplicationMaster):
            def __init__(self, *args, journal=None, **kwargs):
                journals.append(make_journal())
                super().__init__(*args, journal=journals[-1], **kwargs)

        monkeypatch.setattr(engine, "ApplicationMaster", GivenJournal)
        result = engine.replay(synthetic(300), cluster(6), engine.ReplayOptions())
        return result, journals

    kept, memories = run(MemoryJournal)
    none, nothing = run(NoJournal)
    assert [(j.job_id, j.outcome, j.start_s, j.end_s, j.hosts) for j in kept.jobs] == \
        [(j.job_id, j.outcome, j.start_s, j.end_s, j.hosts) for j in none.jobs]
    assert kept.timeline.t.tolist() == none.timeline.t.tolist()
    assert kept.timeline.allocated_gpus.tolist() == none.timeline.allocated_gpus.tolist()
    kinds = [{r["kind"] for r in m.records()} for m in memories]
    assert all({"am_started", "gang_attempt", "job_finished"} <= k for k in kinds)
    assert any({"launched", "tasks_finished", "attempt_ended"} <= k for k in kinds)
    assert all(m.records() == [] for m in nothing)
