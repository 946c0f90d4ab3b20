"""The Slurm commands' answers to what they cannot do, on any machine (no Slurm needed)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from slurm_cluster import REPO, free_ports, gangmaster

MPI_JOB = REPO / "conf" / "jobs" / "mpi-allreduce.yaml"


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
    assert "--partition is a Slurm option: it needs --rm slurm" in result.stderr


def _controller_down(tmp_path: Path) -> dict[str, str]:
    """SLURM_CONF pointing at a cluster whose slurmctld does not run (nothing on its port)."""
    if shutil.which("scontrol") is None:
        pytest.skip("slurm-wlm not installed: apt-get install slurm-wlm")
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=down\nSlurmctldHost=nowhere(127.0.0.1)\nSlurmctldPort={free_ports(0).controller}\n"
                    f"AuthType=auth/none\nCredType=cred/none\n")
    return {"SLURM_CONF": str(conf)}


def _unset(_tmp_path: Path) -> dict[str, str | None]:
    if Path("/etc/slurm/slurm.conf").exists():
        pytest.skip("this machine has a Slurm configuration of its own: SLURM_CONF unset would use it")
    return {"SLURM_CONF": None}


@pytest.mark.parametrize("environment, said", [
    (_unset, ("fatal: Could not establish a configuration source", "scontrol not found")),
    (_controller_down, ("Slurmctld(primary) at nowhere is DOWN",)),
], ids=["SLURM_CONF unset", "slurmctld down"])
def test_a_slurm_that_cannot_be_reached_is_said_so_and_leaves_no_folder(tmp_path, environment, said):
    work = tmp_path / "run"
    result = gangmaster("run", MPI_JOB, "--rm", "slurm", "--work-dir", work, env=environment(tmp_path))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("gangmaster run: cannot reach Slurm (is SLURM_CONF set? is slurmctld running?): ")
    assert any(reason in line for reason in said), line
    assert not work.exists()
