"""``gangmaster validate``: the parsed job, or every error and exit status 2."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from gangmaster.conf import conf_path
from gangmaster.tools import validate_cmd

OPENPAI = Path(__file__).resolve().parents[1] / "fixtures" / "jobspec" / "openpai-pytorch-ps.yaml"


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    validate_cmd.add_parser(parser.add_subparsers())
    args = parser.parse_args(["validate", *argv])
    return args.func(args)


def test_valid_job_prints_roles_gangs_resources(capsys):
    assert run(str(conf_path("jobs/parameter-server.yaml"))) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].endswith("job 'parameter-server' is valid — coordinator + servers + workers, "
                             "per-machine caps and CPU request ratios")
    assert "gang 0: coordinator, server, worker (7 instances, all or nothing)" in lines
    assert "retry: scope job, 2 attempt(s) in all; barrier timeout: unlimited" in lines
    server_row = next(l for l in lines if l.split()[:1] == ["server"])
    # role inst cpu ask memMB gpu ports per-node label gpu-types selector rack sim-s
    assert server_row.split() == ["server", "2", "8", "4", "32768", "0", "grpc:1", "1", "-",
                                  "any", "default", "default", "60"]
    worker_row = next(l for l in lines if l.split()[:1] == ["worker"])
    assert worker_row.split()[:4] == ["worker", "4", "8", "5.6"]
    assert ("role worker: attempt fails at 1 failed, succeeds when all have completed; "
            "retry scope job, 2 attempt(s)") in lines


def test_unused_openpai_fields_are_listed(capsys):
    assert run(str(OPENPAI)) == 0
    out = capsys.readouterr().out
    assert ("unused here (kept; they matter on an OpenPAI cluster): prerequisites, secrets, "
            "deployments, defaults, extras.submitFrom") in out
    assert "not-a-real-password" not in out and "dG9rZW4=" not in out     # secrets never printed


BAD = """
protocolVersion: 2
name: bad
type: job
taskRoles:
  worker:
    instances: -1
    resourcePerInstance: {cpu: 4, memoryMB: 1024, gpu: four}
    commands: [x]
gangmaster:
  gangs: [[worker, ghost]]
"""


def test_errors_go_to_stderr_all_of_them_with_status_2(tmp_path, capsys):
    job = tmp_path / "bad.yaml"
    job.write_text(BAD)
    assert run(str(job)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"gangmaster: {job}: 3 errors in the job spec:",
        f'  {job}: gangmaster.gangs[0][1]: expected a task role (one of worker), got "ghost"',
        f"  {job}: taskRoles.worker.instances: expected an integer >= 1, got -1",
        f'  {job}: taskRoles.worker.resourcePerInstance.gpu: expected an integer within 0..64, got "four"',
    ]


def test_json_errors(tmp_path, capsys):
    job = tmp_path / "bad.yaml"
    job.write_text(BAD)
    assert run(str(job), "--json") == 2
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is False
    assert [e["field"] for e in data["errors"]] == [
        "gangmaster.gangs[0][1]", "taskRoles.worker.instances",
        "taskRoles.worker.resourcePerInstance.gpu"]


def test_json_job(capsys):
    assert run(str(conf_path("jobs/mpi-allreduce.yaml")), "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is True
    job = data["job"]
    assert job["name"] == "mpi-allreduce" and job["gangs"] == [["worker"]]
    assert job["roles"][0]["instances"] == 4 and job["roles"][0]["gpus"] == 1
    assert job["barrier_timeout_s"] == 600


def test_registered_in_the_gangmaster_command():
    # Membership only: building the whole CLI also imports every other subcommand.
    from gangmaster.tools.cli import COMMANDS
    assert COMMANDS["validate"].module == "validate_cmd"


def test_network_domains_are_shown_for_the_gang_and_the_role(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("protocolVersion: 2\nname: dj\ntype: job\ntaskRoles:\n  worker:\n    instances: 6\n"
                   "    resourcePerInstance: {cpu: 4, memoryMB: 8192, gpu: 4}\n    commands: ['true']\n"
                   "    gangmaster: {networkDomain: {preferred: switch}}\n"
                   "gangmaster:\n  networkDomain: {required: rack}\n")
    assert run(str(job)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "gang 0: worker (6 instances, all or nothing, network domain: required rack)" in lines
    assert any(line.endswith("; network domain: preferred switch") for line in lines if line.startswith("role worker"))
