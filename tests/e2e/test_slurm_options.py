"""`gangmaster run --rm slurm` with Slurm's own options on a real (local) Slurm cluster:
--time reaches the job Slurm runs, and --dry-run prints the sbatch of the gang (one
heterogeneous job, a component per host) without submitting it. Skipped, saying why,
where Slurm cannot run (see slurm_cluster.require_slurm)."""
from __future__ import annotations

import json
import subprocess

import pytest

from slurm_cluster import REPO, Runner, job_yaml, start_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("slurm-options"))
    yield cluster
    cluster.stop()


@pytest.fixture
def runner(cluster, tmp_path):
    runner = Runner(cluster, tmp_path)
    yield runner
    runner.clean_up()


def _squeue(runner) -> str:
    return subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, env=runner.env(),
                          timeout=30).stdout


def test_a_dry_run_prints_the_gangs_sbatch_and_submits_nothing(runner, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("slurm-dry"))
    command = [a for a in runner.command(job, work_dir=tmp_path / "run") if a != "--json"]
    done = subprocess.run([*command, "--dry-run", "--account", "proj-7", "--qos", "high", "--time", "0:10:00"],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=runner.env())
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "# --dry-run: nothing submitted; 1 sbatch command(s)" in out
    assert "a heterogeneous job of 3 component(s), one per host" in out     # 4 tasks, at most 1 worker per node
    assert "--account=proj-7 --qos=high --time=0:10:00" in out
    assert out.count("\n    : ") == 2 and "#!/bin/sh" in out
    assert f"{tmp_path / 'run'}/slurm/launcher.sh" in out
    assert not (tmp_path / "run").exists() and "gm-" not in _squeue(runner)


def test_time_reaches_the_slurm_job(runner, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("slurm-time", workers=1))
    done = subprocess.run([*runner.command(job, work_dir=tmp_path / "run"), "--time", "7"], capture_output=True,
                          text=True, timeout=200, cwd=REPO, env=runner.env())
    assert done.returncode == 0, done.stderr
    [app] = (tmp_path / "run" / "slurm" / "apps").glob("*/app.json")
    job_ids = [j["job_id"] for j in json.loads(app.read_text())["jobs"]]
    shown = subprocess.run(["scontrol", "show", "job", str(job_ids[0])], capture_output=True, text=True,
                           env=runner.env(), timeout=30).stdout
    assert "TimeLimit=00:07:00" in shown, shown
