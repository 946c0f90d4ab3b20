"""The AM's HTTP endpoint: what it answers at which path, and a burst of connections it
takes without dropping any."""
from __future__ import annotations

import contextlib
import json
import socket
from urllib.error import HTTPError
from urllib.request import urlopen

import pytest

from gangmaster.am.ops.metrics import AMMetrics, MetricsEndpoint


@pytest.fixture
def endpoint():
    endpoint = MetricsEndpoint()
    endpoint.add(AMMetrics(), why=lambda: {"job": "train", "app_id": "app_0001", "outcome": None, "waiting": {}}, job_name="train", app_id="app_0001")
    endpoint.serve(0)
    yield endpoint
    endpoint.stop()


def get(endpoint: MetricsEndpoint, path: str) -> tuple[int, str]:
    base = endpoint.url.removesuffix("/metrics")
    try:
        with urlopen(base + path, timeout=10) as response:
            return response.status, response.read().decode()
    except HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.parametrize("path, status, holds", [
    ("/metrics", 200, "gangmaster_"),
    ("/metrics?name[]=gangmaster_tasks", 200, ""),
    ("/why", 200, '"jobs"'),
    ("/", 200, "<h1>gangmaster</h1>"),
    ("/index.html", 404, "no such path: /index.html;"),
    ("/foo", 404, "no such path: /foo"),
    ("/whY", 404, "no such path: /whY"),
    ("/why/../metrics", 404, "no such path"),
    ("/metrics/", 404, "no such path"),
    ("/%00", 404, "no such path"),
])
def test_only_the_documented_paths_are_answered(endpoint, path, status, holds):
    code, body = get(endpoint, path)
    assert code == status
    assert holds in body
    if status == 404:
        assert json.loads(body)["error"].endswith("this endpoint serves /, /metrics and /why")


def test_a_burst_of_connections_waits_in_the_backlog_instead_of_being_dropped(endpoint):
    """With nothing accepting, every connection made waits in the listen backlog: with
    socketserver's default of 5, the sixth and later are never answered (they time out)."""
    endpoint.server.shutdown()   # the socket still listens; nothing accepts
    port = endpoint.server.server_port
    burst = 300
    with contextlib.ExitStack() as opened:
        for i in range(burst):
            conn = opened.enter_context(socket.socket())
            conn.settimeout(3)
            try:
                conn.connect(("127.0.0.1", port))
            except OSError as exc:
                pytest.fail(f"connection {i + 1} of {burst} was not taken: {exc}")


def test_build_info_names_the_versions_with_value_1(endpoint):
    from importlib.metadata import version
    import platform

    _, body = get(endpoint, "/metrics")
    [line] = [line for line in body.splitlines() if line.startswith("gangmaster_build_info{")]
    assert line.endswith(" 1.0")
    for label, value in [("version", version("gangmaster")), ("python", platform.python_version()),
                         ("grpcio", version("grpcio")), ("protobuf", version("protobuf"))]:
        assert f'{label}="{value}"' in line


def test_every_metric_name_ends_in_a_base_unit_or_a_count():
    """Prometheus naming (https://prometheus.io/docs/practices/naming/): no milli-units; the
    GPUs a job holds in GPUs, a share as a fraction of one."""
    from prometheus_client import generate_latest

    names = {line.split()[2] for line in generate_latest(AMMetrics().registry).decode().splitlines()
             if line.startswith("# TYPE")}
    assert not [n for n in names if "milli" in n]
    assert {"gangmaster_allocated_gpus", "gangmaster_allocated_shared_gpus"} <= names
