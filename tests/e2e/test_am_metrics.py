"""`--metrics-port`: the chosen port is printed, and one endpoint serves every job."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.request import urlopen

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import load_job
from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
from gangmaster.tools.job_runner import SimulatedRuns

from job_texts import one_role_job

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "conf" / "jobs"


def gangmaster(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


def test_metrics_port_0_prints_the_port_it_chose(tmp_path):
    result = gangmaster("run", JOBS / "single-gpu.yaml", "--metrics-port", 0, "--work-dir", tmp_path / "a", "-q")
    assert result.returncode == 0, result.stderr
    assert re.search(r"^metrics: http://127\.0\.0\.1:\d+/metrics$", result.stdout, re.M)
    result = gangmaster("run", JOBS / "single-gpu.yaml", "--metrics-port", 0, "--work-dir", tmp_path / "b", "--json")
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(result.stdout)                     # stdout stays pure JSON
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", run["metrics_url"])
    assert f"metrics: {run['metrics_url']}" in result.stderr


def test_metrics_host_sets_the_address_the_endpoint_listens_on(tmp_path):
    """127.0.0.2 is this machine too, but not the address the endpoint listened on before
    --metrics-host; the config's am.metrics_host does the same, the flag wins over it."""
    config = tmp_path / "am.yaml"
    config.write_text("am:\n  metrics_host: 127.0.0.3\n")
    for extra, host in [((), "127.0.0.3"), (("--metrics-host", "127.0.0.2"), "127.0.0.2")]:
        result = gangmaster("run", JOBS / "single-gpu.yaml", "--metrics-port", 0, "--config", config, *extra,
                            "--work-dir", tmp_path / host, "-q")
        assert result.returncode == 0, result.stderr
        assert re.search(rf"^metrics: http://{re.escape(host)}:\d+/metrics$", result.stdout, re.M)


def test_an_address_it_cannot_listen_on_exits_2_in_one_line(tmp_path):
    result = gangmaster("run", JOBS / "single-gpu.yaml", "--metrics-port", 0, "--metrics-host", "nosuch.invalid",
                        "--work-dir", tmp_path, "-q")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        'gangmaster: --metrics-host/--metrics-port (am.metrics_host/metrics_port): expected an address and port '
        'this machine can listen on, got "nosuch.invalid:0 (Name or service not known)"']


def test_every_metric_the_grafana_dashboard_queries_is_one_the_am_serves(tmp_path):
    """Names read from a scrape of running AMs, one gang running and one waiting, diagnosed
    (its shortfall and blocked-node gauges then have samples): every name a PromQL
    expression of conf/grafana/gangmaster-am.json uses is a sample name there."""
    from prometheus_client.parser import text_string_to_metric_families

    from gangmaster.am.spec.jobspec import parse_job

    dashboard = json.loads((REPO / "conf" / "grafana" / "gangmaster-am.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bgangmaster_[a-z_]+", target["expr"])}
    queried |= set(re.findall(r"\bgangmaster_[a-z_]+", json.dumps(dashboard["templating"])))
    runs = SimulatedRuns(load_cluster_specs(default_cluster_path()), AMSettings(metrics_port=0, explain_after_s=10))
    try:
        runs.submit(parse_job(one_role_job("holder", 48, duration=600)), tmp_path / "a")   # every GPU of the cluster
        runs.sim.run_until(2)
        runs.submit(parse_job(one_role_job("waiter", 4, duration=60)), tmp_path / "b")
        runs.sim.run_until(60)
        text = urlopen(runs.metrics_url, timeout=5).read().decode()
    finally:
        runs.close()
    served = {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}
    assert 'gangmaster_gang_shortfall{app_id="app_0002"' in text      # the waiting gang's gauges have samples
    assert len(queried) >= 15
    assert sorted(queried - served) == []


def test_one_endpoint_serves_every_job_labelled_by_job(tmp_path):
    runs = SimulatedRuns(load_cluster_specs(default_cluster_path()), AMSettings(metrics_port=0))
    runs.submit(load_job(JOBS / "mpi-allreduce.yaml"), tmp_path / "a")
    runs.submit(load_job(JOBS / "single-gpu.yaml"), tmp_path / "b")
    try:
        runs.sim.run_until(10)
        text = urlopen(runs.metrics_url, timeout=5).read().decode()
    finally:
        runs.close()
    assert 'gangmaster_containers{app_id="app_0001",job_name="mpi-allreduce",state="running"} 4.0' in text
    assert 'gangmaster_containers{app_id="app_0002",job_name="single-gpu",state="running"} 1.0' in text
    assert 'gangmaster_gang_attempts_total{app_id="app_0002",job_name="single-gpu"} 1.0' in text
    assert text.count("# TYPE gangmaster_containers gauge") == 1       # one family, both jobs in it
