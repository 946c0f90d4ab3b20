"""The secrets gangmaster writes to disk (the AM's journal and the RM's state file hold
barrier tokens) are readable by their owner only, whatever the umask."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gangmaster.am.core.journal import Journal
from gangmaster.protocol.private_files import open_private

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


@pytest.fixture
def open_umask():
    """Every file anyone creates is world-readable unless its creator says otherwise."""
    old = os.umask(0)
    yield
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_journal_holding_barrier_tokens_is_private(tmp_path, open_umask):
    journal = Journal(tmp_path / "run" / "journal.jsonl")
    journal.write("launched", gang="g", attempt=1, barrier_token="the-secret")
    journal.close()
    assert mode(tmp_path / "run" / "journal.jsonl") == 0o600


def test_an_existing_world_readable_journal_is_made_private(tmp_path, open_umask):
    path = tmp_path / "journal.jsonl"
    path.write_text("")
    os.chmod(path, 0o644)
    Journal(path).close()
    assert mode(path) == 0o600


def test_the_rm_state_file_holding_task_environments_is_private(tmp_path, open_umask):
    from gangmaster.tools.rmsim import state
    from gangmaster.tools.rmsim.simulation import Simulation

    sim = Simulation.from_files(FIX / "cluster.yaml")
    state.save(sim.core, tmp_path / "state.json")
    assert mode(tmp_path / "state.json") == 0o600


def test_open_private_appends_and_writes(tmp_path, open_umask):
    path = tmp_path / "secret"
    with open_private(path, "w") as f:
        f.write("one\n")
    with open_private(path, "a") as f:
        f.write("two\n")
    assert path.read_text() == "one\ntwo\n" and mode(path) == 0o600
    with open_private(path, "w") as f:
        f.write("three\n")
    assert path.read_text() == "three\n"
