"""``gangmaster run --rm slurm``'s way out: what it says when the run ends (tools/slurm/cli_run.py)."""
from __future__ import annotations

import argparse

import pytest

from gangmaster.tools import run_cmd
from gangmaster.tools.slurm import cli_run, client, runs


class FakeClient:
    def __init__(self, *args, **options):
        pass

    def ping(self):
        pass


class FakeRuns:
    """SlurmRuns whose run() ends as a real one would: unfinished, with or without an AM's failure."""
    failure: str | None = None

    def __init__(self, *args, **kwargs):
        self.runs, self.interrupted = [], None

    def check_work_dir(self, job, work_dir):
        pass

    def submit(self, job, work_dir, queue):
        pass

    def run(self, timeout):
        return False

    def shutdown(self):
        pass


@pytest.mark.parametrize("failure, said", [
    ("the AM of job mpi (app_0001) failed: RuntimeError: the AM broke",
     "gangmaster run: the AM of job mpi (app_0001) failed: RuntimeError: the AM broke; "
     "the run was stopped and its Slurm jobs were cancelled"),
    (None, "gangmaster run: stopped before every job finished (--timeout); its Slurm jobs were cancelled"),
])
def test_the_run_says_why_it_stopped_early(tmp_path, monkeypatch, capsys, failure, said):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setattr(client, "SlurmRMClient", FakeClient)
    monkeypatch.setattr(runs, "SlurmRuns", type("Failing", (FakeRuns,), {"failure": failure}))
    monkeypatch.setattr(run_cmd, "print_metrics_url", lambda *a: None)
    monkeypatch.setattr(run_cmd, "print_reports", lambda *a: None)
    monkeypatch.setattr("gangmaster.am.barrier.config.BarrierConfig.load", staticmethod(lambda path: None))
    args = argparse.Namespace(rm="slurm", cluster=None, queues=None, scenario=None, live=False, partition=None,
                              work_dir=str(tmp_path), config=None, timeout=5, json=False)
    job = argparse.Namespace(name="mpi")
    assert cli_run.run_on_slurm(args, [job], None, None, None) == 1
    assert capsys.readouterr().err.strip() == said
