"""The flagship stories through the real CLI, so none breaks again unseen: every job in
conf/jobs/ runs on the cluster it is meant for and ends as it should, and story 3's two
incidents give their diagnosis through `gangmaster diagnose`. The jobs are found in the
folder: a new job file fails here until the table says where it runs and how it ends."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gangmaster.tools.cli import main
from shipped_jobs import JOBS

CONF = Path(__file__).resolve().parents[2] / "conf"
JOB_FILES = sorted((CONF / "jobs").glob("*.yaml"))


@pytest.mark.parametrize("path", JOB_FILES, ids=[p.name for p in JOB_FILES])
def test_every_shipped_job_runs_on_its_cluster(path, tmp_path, capsys):
    assert path.name in JOBS, f"{path.name}: add it to JOBS in tests/shipped_jobs.py (its cluster and the exit `gangmaster run` gives)"
    cluster, expected = JOBS[path.name]
    assert (CONF / "clusters" / cluster).is_file()
    code = main(["run", str(path), "--cluster", str(CONF / "clusters" / cluster), "--work-dir", str(tmp_path),
                 "--quiet"])
    out = capsys.readouterr().out
    assert code == expected, out
    if expected == 0:
        assert "SUCCEEDED" in out and "succeeded (exit 0)" in out


def test_the_table_names_only_shipped_jobs():
    assert set(JOBS) <= {p.name for p in JOB_FILES}


#: story 3's incidents (README: "Why is my gang pending?"): the extra arguments, then the
#: servers' (needed, placeable, shortfall), their reasons (code, count, waiting helps), the
#: healthy machines, the blocking jobs (job, machines, vcores held) and how the hint begins
INCIDENTS = {
    "blacklisted-overnight": (
        ["--scenario", str(CONF / "scenarios" / "story3-blacklisted.yaml")],
        (3000, 2998, 2), [("unhealthy", 32, False), ("role-cap-reached", 2998, False)], 2998, [],
        "2 more machine(s) like s10-0001, or restore 2 of the 32 unhealthy/blacklisted machines (s10-0000, s10-0100)"),
    "xlibmpi-evening": (
        ["--after", str(CONF / "jobs" / "story3-xlibmpi.yaml")],
        (3000, 2940, 60), [("role-cap-reached", 2940, False), ("vcores-exhausted", 90, True)], 3030,
        [("xlibmpi", 90, 2250)], "60 more machine(s) like s10-0000, or when job xlibmpi ends"),
}


@pytest.mark.parametrize("incident", INCIDENTS)
def test_story3_incidents_are_diagnosed_by_the_command(incident, capsys):
    extra, counts, reasons, healthy, blocking, hint = INCIDENTS[incident]
    code = main(["diagnose", str(CONF / "jobs" / "story3-ps.yaml"), "--cluster",
                 str(CONF / "clusters" / "story3-incidents.yaml"), *extra, "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 1   # the gang cannot start
    assert (d["gang_can_start"], d["fits_empty_cluster"], d["healthy_machines"], d["machines"]) == (
        False, True, healthy, 3030)
    server = d["roles"]["server"]
    assert (server["needed"], server["placeable"], server["shortfall"]) == counts
    assert server["asked"] == {"vcores": 7.5, "memoryMB": 16384, "gpus": 0}
    assert [(r["code"], r["count"], r["waiting_helps"]) for r in server["reasons"]] == reasons
    assert [(r["placeable"], r["shortfall"]) for name, r in d["roles"].items() if name != "server"] == [
        (1, 0), (3000, 0)]
    assert [(b["job"], b["machines"], b["holds"]["vcores"]) for b in d["blocking_jobs"]] == blocking
    assert d["hint"].startswith(hint)
