"""A journal field may be a finished record (an ended attempt's AttemptRecord): the file
journal writes its dict at once, the memory journal only when read, and both read back
the same; anything else that JSON cannot hold is refused."""
import pytest

from gangmaster.am.journal import JOURNAL_FILE, Journal, MemoryJournal, read_records, replay
from gangmaster.am.lifecycle import AttemptRecord, TaskRecord, TaskState


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
    (history,) = replay([written]).gangs["worker"].history
    assert history.to_dict() == ended_attempt().to_dict()


def test_a_field_json_cannot_hold_is_refused_by_the_file_journal(tmp_path):
    journal = Journal(tmp_path / JOURNAL_FILE)
    with pytest.raises(TypeError, match="cannot hold a set"):
        journal.write("released", containers={"c1"})
    journal.close()


def test_an_empty_memory_journal_reads_no_records():
    assert MemoryJournal().records() == []
