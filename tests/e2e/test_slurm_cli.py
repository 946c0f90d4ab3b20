"""The Slurm commands' answers to what they cannot do, on any machine (no Slurm needed)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MPI_JOB = REPO / "conf" / "jobs" / "mpi-allreduce.yaml"


def gangmaster(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=REPO, env={**os.environ, **(env or {})})


def test_starting_a_local_cluster_without_slurm_says_how_to_get_it(tmp_path):
    result = gangmaster("slurm", "local-cluster", "start", "--work-dir", tmp_path / "c", env={"PATH": str(tmp_path)})
    assert result.returncode == 3
    assert "slurm-wlm not installed" in result.stderr and "apt-get install slurm-wlm" in result.stderr
    assert not (tmp_path / "c" / "slurm.conf").exists()


def test_status_of_a_folder_without_a_cluster(tmp_path):
    result = gangmaster("slurm", "local-cluster", "status", "--work-dir", tmp_path)
    assert result.returncode == 1
    assert f"no local Slurm cluster in {tmp_path}" in result.stdout


def test_options_of_the_simulator_are_refused_with_slurm(tmp_path):
    result = gangmaster("run", MPI_JOB, "--rm", "slurm", "--scenario", "x.yaml", "--live", "--work-dir", tmp_path)
    assert result.returncode == 2
    assert "--scenario, --live cannot be used with --rm slurm" in result.stderr


def test_a_slurm_conf_that_is_not_there_is_named(tmp_path):
    result = gangmaster("run", MPI_JOB, "--rm", "slurm", "--work-dir", tmp_path,
                        env={"SLURM_CONF": str(tmp_path / "missing.conf")})
    assert result.returncode == 2
    assert f"SLURM_CONF={tmp_path / 'missing.conf'} is not a file" in result.stderr


def test_a_partition_without_slurm_is_refused(tmp_path):
    result = gangmaster("run", MPI_JOB, "--partition", "gpu", "--work-dir", tmp_path)
    assert result.returncode == 2
    assert "--partition is a Slurm partition: it needs --rm slurm" in result.stderr
