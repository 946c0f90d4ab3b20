"""`gangmaster diagnose JOB --yarn-rm DIR` straight from a running YARN: while one job holds every GPU
of the local cluster, a gang that needs GPUs cannot start, and the diagnosis says that waiting
helps and names the application that holds them (read from the RM's /nodes, /apps and
/scheduler at once). The cluster is the session's (yarn_cluster.py), held alone: the
diagnosis counts what every application holds."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.request import urlopen

import pytest

from gangmaster.am.core.journal import JOURNAL_FILE, read_records, read_state

from task_procs import killed_on_exit, wait_until
from yarn_cluster import REPO, YARN, Runner, job_yaml, records, reports

pytestmark = YARN


@pytest.fixture
def runner(yarn_session_cluster):
    runner = Runner(yarn_session_cluster)
    yield runner
    runner.clean_up()


def _gangmaster(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *argv], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_a_gang_waiting_for_gpus_another_job_holds_is_diagnosed_with_the_holder(runner, yarn_cluster_alone,
                                                                               tmp_path: Path):
    holder = tmp_path / "holder.yaml"
    holder.write_text(job_yaml("yarn-holder", chief_gpus=4, worker_gpus=4, workers=2))   # every GPU of 3 nodes
    waiting = tmp_path / "waiting.yaml"
    waiting.write_text(job_yaml("yarn-waiting"))
    output = tmp_path / "run" / "output"
    cluster = str(yarn_cluster_alone.work_dir)
    with killed_on_exit(runner.start(holder, work_dir=tmp_path / "run", extra=("--metrics-port", "0"),
                                     GANG_TEST_HOLD_S="90")) as proc:
        wait_until(lambda: len(records(output, "started", 1)) == 3 or None, 60, "every task of the holder to start")
        snap = _gangmaster("snapshot", "--yarn-rm", cluster, "--json")
        found = _gangmaster("diagnose", str(waiting), "--yarn-rm", cluster, "--json")
        # the AM in its YARN container serves /why and /metrics, and gave YARN the address (its tracking URL)
        metrics_url = (tmp_path / "run" / "yarn" / "metrics-url").read_text().strip()
        why = _gangmaster("why", "--address", metrics_url.split("/")[2], "--json")
        app_id = read_state(read_records(tmp_path / "run" / JOURNAL_FILE)).app_id
        proxied = json.loads(urlopen(f"{yarn_cluster_alone.rm_web}/proxy/{app_id}/why", timeout=10).read())
        (output / "release").touch()
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    [report] = reports(stdout, stderr)
    assert report["outcome"] == "succeeded" and report["metrics_url"] == metrics_url
    assert f"metrics: {metrics_url}" in stderr
    assert why.returncode == 0, why.stderr   # nothing of the holder waits
    assert [j["job"] for j in json.loads(why.stdout)["jobs"]] == ["yarn-holder"]
    assert [j["app_id"] for j in proxied["jobs"]] == [app_id]   # through the RM's proxy: registered
    assert snap.returncode == 0, snap.stderr
    nodes = json.loads(snap.stdout)["nodes"]
    assert sorted(n["host"] for n in nodes) == sorted(yarn_cluster_alone.state()["nodes"])   # the file's names
    assert found.returncode == 1, found.stdout + found.stderr
    diagnosis = json.loads(found.stdout)
    assert not diagnosis["gang_can_start"] and diagnosis["fits_empty_cluster"], diagnosis
    assert [b["job"] for b in diagnosis["blocking_jobs"]] == ["yarn-holder"], diagnosis
    reasons = {r["code"]: r for role in diagnosis["roles"].values() for r in role["reasons"]}
    assert reasons["gpus-exhausted"]["waiting_helps"], reasons
