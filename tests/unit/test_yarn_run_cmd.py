"""`gangmaster run --rm yarn`'s refusals, before anything is submitted or any folder made: exit 2
and one line saying what was expected (the real runs: tests/e2e/test_yarn_run.py)."""
from __future__ import annotations

import json

import pytest

from gangmaster.conf import conf_path
from gangmaster.tools.cli import main

JOB = str(conf_path("jobs/mpi-allreduce.yaml"))


def _stopped_cluster(tmp_path):
    folder = tmp_path / "stopped"
    folder.mkdir()
    (folder / "local-cluster.json").write_text(json.dumps({"stopped": True, "ports": {"rm": 18030}}))
    return str(folder)


@pytest.mark.parametrize("arguments,env,message", [
    (["--yarn-rm", "http://rm:8088"], {}, "--yarn-rm names a YARN cluster: it needs --rm yarn"),
    (["--rm", "yarn"], {}, "no YARN cluster named: set YARN_RM (or --yarn-rm)"),
    (["--rm", "yarn", "--yarn-rm", "{tmp}/nowhere"], {}, "expected http://HOST:PORT (the RM's web address) or the "
                                                         "folder of a `gangmaster yarn local-cluster`"),
    (["--rm", "yarn"], {"YARN_RM": "{stopped}"}, "$YARN_RM={stopped}: its local YARN cluster was stopped"),
    (["--rm", "yarn", "--yarn-rm", "http://rm:8088", "--live"], {}, "--live cannot be used with --rm yarn"),
    (["--rm", "yarn", "--yarn-rm", "http://rm:8088", "--partition", "p"], {}, "--partition cannot be used"),
    (["--rm", "yarn", "--yarn-rm", "http://127.0.0.1:1"], {}, "YARN at http://127.0.0.1:1 does not answer"),
])
def test_refused_before_anything_is_submitted(arguments, env, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("YARN_RM", raising=False)
    stopped = _stopped_cluster(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value.format(tmp=tmp_path, stopped=stopped))
    arguments = [a.format(tmp=tmp_path) for a in arguments]
    code = main(["run", JOB, *arguments, "--work-dir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message.format(stopped=stopped) in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "work").exists()


# ------------------------------------------------------------------ the coordinator's port across AMs
def _taken_port():
    import socket
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


def _free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return sock.getsockname()[1]


#: what the port file holds, the configured port -> the port the next coordinator is given
#: ("free"/"taken": a port of that kind; None: whatever the configuration says)
SAME_PORT_CASES = {
    "an earlier coordinator's free port": ("free", 0, "free"),
    "its port taken by now: any port": ("taken", 0, 0),
    "a configured port wins": ("free", 1234, 1234),
    "no file: as configured": (None, 0, 0),
    "a file that says no number": ("x", 0, 0),
}


@pytest.mark.parametrize("written, configured, expected", SAME_PORT_CASES.values(), ids=list(SAME_PORT_CASES))
def test_the_next_coordinator_takes_the_earlier_port(tmp_path, written, configured, expected):
    from gangmaster.am.barrier.config import BarrierConfig
    from gangmaster.tools.job_runner import _same_port

    holder, taken = _taken_port()
    try:
        ports = {"free": _free_port(), "taken": taken}
        port_file = tmp_path / "barrier-port"
        if written is not None:
            port_file.write_text(str(ports.get(written, written)))
        config = _same_port(BarrierConfig(port=configured), port_file)
        assert config.port == ports.get(expected, expected)
    finally:
        holder.close()


# ------------------------------------------------------------------ the AM's metrics on YARN
def test_metrics_flags_reach_the_am_container(tmp_path, monkeypatch, capsys):
    """--metrics-port/--metrics-host go to the AM in its YARN container, which serves them
    (tests/e2e/test_yarn_diagnose.py asks a running one): handed on in its command line."""
    import gangmaster.tools.yarn.runs as yarn_runs
    from gangmaster.protocol.rm_protocol import RMError
    from gangmaster.tools.yarn.am_container import parser

    handed: list[list[str]] = []

    class Unanswered:
        def cluster_nodes(self):
            raise RMError("connection refused")

    class Runs:
        def __init__(self, target, settings, echo, am_options, cluster_file):
            handed.append(am_options)
            self.client = Unanswered()

        def shutdown(self):
            pass

    monkeypatch.setattr(yarn_runs, "YarnRuns", Runs)
    monkeypatch.chdir(tmp_path)
    code = main(["run", JOB, "--rm", "yarn", "--yarn-rm", "http://rm:8088", "--metrics-port", "0",
                 "--metrics-host", "0.0.0.0", "--work-dir", str(tmp_path / "work")])
    assert code == 2 and "YARN at http://rm:8088 does not answer" in capsys.readouterr().err
    args = parser().parse_args(["--job", "j.yaml", "--work-dir", "w", "--yarn-rm", "http://rm:8088", *handed[0]])
    assert (args.metrics_port, args.metrics_host) == (0, "0.0.0.0")


def test_a_fixed_metrics_port_with_several_jobs_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["run", JOB, JOB, "--rm", "yarn", "--yarn-rm", "http://127.0.0.1:1", "--metrics-port", "9100",
                 "--work-dir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--metrics-port 9100 with several jobs on --rm yarn" in err and "give --metrics-port 0" in err
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("report_json", [False, True], ids=["text report: stdout", "JSON report: stderr"])
def test_each_url_an_am_writes_is_printed_once_and_reported(tmp_path, capsys, report_json):
    """What the AM in its container writes (tools/yarn/am_container.py's METRICS_URL_FILE), gangmaster
    run prints as `metrics: URL`, again when a later AM attempt serves elsewhere, and reports."""
    from gangmaster.am.spec.am_settings import AMSettings
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.tools.job_runner import JobRun
    from gangmaster.tools.yarn.am_container import METRICS_URL_FILE
    from gangmaster.tools.yarn.runs import YarnRuns
    from gangmaster.tools.yarn.target import YarnTarget

    runs = YarnRuns(YarnTarget("http://rm:8088", "rm:8030", {}), AMSettings(metrics_port=0), client=object())
    try:
        runs.report_json = report_json
        run = JobRun(load_job(JOB), "application_1_0001", tmp_path, "default")
        runs.runs.append(run)
        runs._follow_metrics()                      # nothing written yet
        (tmp_path / "yarn").mkdir()
        for url in ("http://nm1:41000/metrics", "http://nm1:41000/metrics", "http://nm2:42000/metrics"):
            (tmp_path / "yarn" / METRICS_URL_FILE).write_text(url + "\n")
            runs._follow_metrics()
        assert runs.metrics_url == runs.metrics_url_of(run) == "http://nm2:42000/metrics"
    finally:
        runs.runs.clear()   # (nothing to kill at YARN)
        runs.shutdown()
    out, err = capsys.readouterr()
    assert (err if report_json else out).splitlines() == ["metrics: http://nm1:41000/metrics",
                                                          "metrics: http://nm2:42000/metrics"]


# ------------------------------------------------------------------ the job's priority on YARN
@pytest.mark.parametrize("priority", [0, 7, -3])
def test_the_jobs_priority_is_yarns_application_priority(tmp_path, priority):
    """`gangmaster: priority` is submitted as YARN's application priority (the REST body's
    `priority`, which the RM puts in ApplicationSubmissionContextProto.priority)."""
    from gangmaster.am.spec.am_settings import AMSettings
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.tools.yarn.runs import YarnRuns
    from gangmaster.tools.yarn.target import YarnTarget

    class Client:
        am_spec = None

        def cluster_nodes(self):
            return []

        def submit(self, submission):
            self.body = self.am_spec(submission).body("application_1_0001")
            return "application_1_0001"

    base = load_job(JOB)
    job = base.for_job(base.name, base.source, base.simulation, priority=priority)
    runs = YarnRuns(YarnTarget("http://rm:8088", "rm:8030", {}), AMSettings(), client=Client())
    try:
        runs.submit(job, tmp_path / "work")
        assert runs.client.body["priority"] == priority
    finally:
        runs.runs.clear()   # (nothing to kill at YARN)
        runs.shutdown()
