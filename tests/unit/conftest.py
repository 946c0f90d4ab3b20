"""Set-up shared by the unit tests: an RM client of each kind, self-signed TLS files, and
simulated runs whose AMs share a real barrier coordinator."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.server import BarrierServer
from gangmaster.protocol.rm_client import InProcessRMClient
from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.server import LiveRM, start_server
from gangmaster.tools.rmsim.simulation import Simulation

RM_FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


@pytest.fixture(params=["in-process", "grpc"])
def rm(request, tmp_path):
    """An RM client of each kind on fixtures/rm/cluster.yaml: the in-process core, and a
    live RM over real gRPC; ``rm.core`` is the core behind it (to check its books)."""
    specs = load_cluster_specs(RM_FIX / "cluster.yaml")
    if request.param == "in-process":
        yield InProcessRMClient(Simulation(specs).core)
        return
    live = LiveRM(specs, work_dir=tmp_path / "tasks", poll_s=0.02)
    server, port = start_server(live)
    client = GrpcRMClient(f"127.0.0.1:{port}", timeout_s=10)
    client.core = live.core
    try:
        yield client
    finally:
        client.close()
        server.stop(0)
        live.stop()


@pytest.fixture
def self_signed(tmp_path):
    """``self_signed(name="server", passphrase=None) -> (cert, key)``: PEM files of a new
    self-signed certificate for localhost and 127.0.0.1 and its key (encrypted with
    ``passphrase`` when given), made in ``tmp_path`` by the openssl command (the test is
    skipped where there is none)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")

    def make(name: str = "server", passphrase: str | None = None) -> tuple[Path, Path]:
        cert, key = tmp_path / f"{name}-cert.pem", tmp_path / f"{name}-key.pem"
        secret = ["-passout", f"pass:{passphrase}"] if passphrase else ["-nodes"]
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", *secret, "-days", "1",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
        return cert, key

    return make


@pytest.fixture
def coordinated_runs():
    """``(SimulatedRuns subclass, server)``: runs in virtual time whose AMs all use one real
    barrier coordinator on 127.0.0.1 (which outlives any AM), stopped after the test. The
    simulated tasks cannot reach it and run without a barrier: what is tested is the AM's
    side of a live coordinator."""
    server = BarrierServer(BarrierConfig())
    server.start()

    class WithCoordinator(SimulatedRuns):
        def _am_extras(self, run):
            return {"barrier": server}

    yield WithCoordinator, server
    server.stop(grace=0)
