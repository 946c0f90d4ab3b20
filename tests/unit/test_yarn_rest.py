"""The RM REST client against a fake RM that answers as Hadoop 3.4.2's did (bodies recorded
from a real ResourceManager), and with its RemoteException errors."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gangmaster.tools.yarn.rest import AMSpec, RestError, YarnRest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "yarn"
NEW_APP = {"application-id": "application_1796174409382_0001",
           "maximum-resource-capability": {"memory": 4096, "vCores": 4}}
NOT_FOUND = {"RemoteException": {"exception": "NotFoundException",
                                 "message": "java.lang.Exception: app with id: application_1_0001 not found",
                                 "javaClassName": "org.apache.hadoop.yarn.webapp.NotFoundException"}}
TOO_BIG = {"RemoteException": {"exception": "BadRequestException",
                               "message": "java.lang.Exception: Requested more memory than configured max",
                               "javaClassName": "org.apache.hadoop.yarn.webapp.BadRequestException"}}


class FakeRM(BaseHTTPRequestHandler):
    requests: list = []

    def log_message(self, *args):
        pass

    def _answer(self, status: int, body) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def do_POST(self):
        body = self._body()
        self.requests.append(("POST", self.path, body))
        if self.path.startswith("/ws/v1/cluster/apps/new-application"):
            return self._answer(200, NEW_APP)
        if body["resource"]["memory"] > 4096:
            return self._answer(400, TOO_BIG)
        return self._answer(202, None)

    def do_PUT(self):
        self.requests.append(("PUT", self.path, self._body()))
        self._answer(200, {"state": "KILLED"})

    def do_GET(self):
        self.requests.append(("GET", self.path, None))
        if self.path.startswith("/ws/v1/cluster/nodes"):
            return self._answer(200, json.loads((FIXTURES / "nodes-3.4.2.json").read_text()))
        if self.path.startswith("/ws/v1/cluster/apps/application_1_0001"):
            return self._answer(404, NOT_FOUND)
        if self.path.split("?")[0].endswith("/appattempts"):
            return self._answer(200, {"appAttempts": {"appAttempt": [{"id": 1, "containerId": "c"}]}})
        if self.path.startswith("/ws/v1/cluster/apps/"):
            return self._answer(200, {"app": {"state": "FINISHED", "finalStatus": "SUCCEEDED"}})
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b"<html>oops</html>")


@pytest.fixture
def rm():
    FakeRM.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeRM)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield YarnRest(f"http://127.0.0.1:{server.server_address[1]}", user="alice")
    server.shutdown()
    server.server_close()


def test_submit_sends_the_am_container_spec(rm):
    spec = AMSpec("gang", ["python -m am --x 1"], environment={"A": "1"}, memory_mb=512, vcores=2, gpus=1,
                  max_app_attempts=2, keep_containers_across_attempts=True)
    assert rm.submit(spec) == NEW_APP["application-id"]
    (_, new_path, _), (_, path, body) = FakeRM.requests
    assert new_path == "/ws/v1/cluster/apps/new-application?user.name=alice"
    assert path == "/ws/v1/cluster/apps?user.name=alice"
    assert body["application-id"] == NEW_APP["application-id"]
    assert body["am-container-spec"] == {"commands": {"command": "python -m am --x 1"},
                                         "environment": {"entry": [{"key": "A", "value": "1"}]}}
    assert body["resource"] == {"memory": 512, "vCores": 2, "resourceInformations": {
        "resourceInformation": [{"name": "yarn.io/gpu", "value": 1}]}}
    assert body["max-app-attempts"] == 2 and body["keep-containers-across-application-attempts"] is True


def test_no_gpus_no_resource_informations(rm):
    rm.submit(AMSpec("plain", ["true"]))
    assert FakeRM.requests[-1][2]["resource"] == {"memory": 256, "vCores": 1}


def test_reports_kill_and_nodes(rm):
    assert rm.application("application_9_0001")["finalStatus"] == "SUCCEEDED"
    assert rm.attempts("application_9_0001") == [{"id": 1, "containerId": "c"}]
    rm.kill("application_9_0001")
    assert FakeRM.requests[-1] == ("PUT", "/ws/v1/cluster/apps/application_9_0001/state?user.name=alice",
                                   {"state": "KILLED"})
    nodes = rm.nodes()
    assert sorted(n["id"] for n in nodes) == ["localhost:18100", "localhost:18110", "localhost:18120"]
    gpu = [r for r in nodes[0]["totalResource"]["resourceInformations"]["resourceInformation"]
           if r["name"] == "yarn.io/gpu"]
    assert gpu[0]["value"] == 4


@pytest.mark.parametrize("call,status,exception,message", [
    (lambda rm: rm.application("application_1_0001"), 404, "NotFoundException", "app with id: application_1_0001"),
    (lambda rm: rm.submit(AMSpec("big", ["true"], memory_mb=8192)), 400, "BadRequestException",
     "Requested more memory than configured max"),
    (lambda rm: rm.info(), 500, "", "<html>oops</html>"),
])
def test_rm_errors_are_typed(rm, call, status, exception, message):
    with pytest.raises(RestError) as info:
        call(rm)
    assert (info.value.status, info.value.exception) == (status, exception)
    assert message in info.value.message and f"(HTTP {status})" in str(info.value)


def test_unreachable_rm():
    with pytest.raises(RestError, match="cannot be reached") as info:
        YarnRest("http://127.0.0.1:9", timeout_s=2).nodes()
    assert info.value.status == 0
