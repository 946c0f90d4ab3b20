"""`gangmaster snapshot --yarn-rm` and `diagnose --yarn-rm`: a snapshot read from a running RM at
once, here an HTTP server that answers what a Hadoop 3.4.2 RM answered while a job ran
(tests/fixtures/yarn/rest-*-running-3.4.2.json); the live cluster: tests/e2e/test_yarn_diagnose.py."""
from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from gangmaster.tools.cli import main

REAL_YARN = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "yarn"
ANSWERS = {"/ws/v1/cluster/nodes": "rest-nodes-running-3.4.2.json",
           "/ws/v1/cluster/apps": "rest-apps-running-3.4.2.json",
           "/ws/v1/cluster/scheduler": "rest-scheduler-running-3.4.2.json"}
#: 3 workers x 4 GPUs: while "sleepy" holds 4 GPUs of one node and 2 of another, one fits
BIG_GANG = """protocolVersion: 2
name: big-gang
type: job
taskRoles:
  worker:
    instances: 3
    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 4}
    commands: [sleep 1]
"""


class _RM(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        name = ANSWERS.get(self.path.split("?")[0])
        body = (REAL_YARN / name).read_bytes() if name else b"{}"
        self.send_response(200 if name else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def rm():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _local_cluster(tmp_path, rm):
    """A local-cluster folder whose RM is ``rm`` and whose nodes are yarn-00N of its cluster file."""
    folder = tmp_path / "cluster"
    folder.mkdir()
    port = int(rm.rsplit(":", 1)[1])
    specs = [{"host": f"yarn-00{n}", "rack": "rack-a", "labels": ["nvlink"], "gpu_type": "T4",
              "topology": "pcie-4gpu", "memory_mb": 40960, "vcores": 12, "gpus": 4, "ports": "20000-29999"}
             for n in range(3)]
    (folder / "local-cluster.json").write_text(json.dumps({
        "ports": {"rm": port - 8}, "specs": specs,
        "nodes": {f"yarn-00{n}": {"node_id": f"localhost:181{n}0"} for n in range(3)}}))
    return str(folder)


def test_snapshot_read_from_the_rm(rm, capsys):
    assert main(["snapshot", "--yarn-rm", rm, "--json"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert sorted(n["host"] for n in snap["nodes"]) == ["localhost:18100", "localhost:18110", "localhost:18120"]
    assert sorted((a["job"], a["host"], a["gpus"]) for a in snap["running"]) == [
        ("sleepy", "localhost:18100", 4), ("sleepy", "localhost:18110", 2)]
    assert snap["taken_at_from"] == f"read from {rm} then"


def test_a_local_clusters_nodes_keep_their_names_and_metadata(rm, tmp_path, capsys):
    assert main(["snapshot", "--yarn-rm", _local_cluster(tmp_path, rm), "--json"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert sorted((n["host"], n["gpuType"], tuple(n["labels"])) for n in snap["nodes"]) == [
        (f"yarn-00{n}", "T4", ("nvlink",)) for n in range(3)]
    assert sorted((a["host"], a["gpus"]) for a in snap["running"]) == [("yarn-000", 4), ("yarn-001", 2)]
    assert not any("GPU models" in note for note in snap["notes"])


def test_diagnose_names_the_application_holding_the_gpus(rm, tmp_path, capsys):
    job = tmp_path / "big-gang.yaml"
    job.write_text(BIG_GANG)
    assert main(["diagnose", str(job), "--yarn-rm", rm, "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert not found["gang_can_start"] and found["fits_empty_cluster"]
    assert [b["job"] for b in found["blocking_jobs"]] == ["sleepy"]


REFUSED = {
    "an RM that does not answer": (["snapshot", "--yarn-rm", "http://127.0.0.1:9"], "the ResourceManager's JSON"),
    "https": (["snapshot", "--yarn-rm", "https://127.0.0.1:9"], "http://HOST:PORT"),
    "a folder that is no cluster": (["snapshot", "--yarn-rm", "/nonexistent"], "gangmaster yarn local-cluster"),
    "--yarn-rm beside --cluster": (["diagnose", "JOB", "--yarn-rm", "http://127.0.0.1:9", "--cluster", "c.yaml"],
                                   "either --cluster or --yarn-rm"),
}


@pytest.mark.parametrize("argv, expected", REFUSED.values(), ids=list(REFUSED))
def test_refused_in_one_line(argv, expected, tmp_path, capsys):
    if "JOB" in argv:
        job = tmp_path / "big-gang.yaml"
        job.write_text(BIG_GANG)
        argv = [str(job) if a == "JOB" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1


def test_a_key_jersey_repeats_is_read_as_the_list_it_stands_for():
    from gangmaster.tools.yarn.live_snapshot import repeated_keys_as_lists

    body = b'{"m": {"entry": {"key": "vcores", "value": "22"}, "entry": {"key": "memory-mb", "value": "9"}}, "n": [1]}'
    assert json.loads(repeated_keys_as_lists(body)) == {
        "m": {"entry": [{"key": "vcores", "value": "22"}, {"key": "memory-mb", "value": "9"}]}, "n": [1]}
    assert repeated_keys_as_lists(b"{not json") == b"{not json"
