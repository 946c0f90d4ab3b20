"""`gangmaster rm serve` as a real process, for the end-to-end tests: start one, stop
one, and get containers pinned to named hosts from it."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ResourceRequest

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
RM_CLI = [sys.executable, "-m", "gangmaster.tools.cli", "rm"]


def start_rm_serve(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """A running `rm serve --cluster fixtures/rm/cluster.yaml *extra` (its stderr appended
    to ``tmp_path/server.err``; ``env``: its environment, which its tasks inherit); returns
    (process, address) once it prints 'listening on'."""
    err = open(tmp_path / "server.err", "a")
    proc = subprocess.Popen(RM_CLI + ["serve", "--cluster", str(FIX / "cluster.yaml"), *extra],
                            stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp_path, env=env)
    line = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout=30)
    if not line or "listening on" not in line[0]:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"server did not start: {line} {(tmp_path / 'server.err').read_text()}")
    return proc, line[0].split("listening on ")[1].split()[0]


def stop_rm_serve(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def pinned_containers(rm, app_name: str, *asks) -> tuple[str, list]:
    """Submit and register an application, and allocate one container per ``(resource,
    host)`` ask, each on its host (locality not relaxed). Returns the application and
    its containers in the order of the asks."""
    app = rm.submit(ApplicationSubmission(app_name))
    rm.register(app)
    requests = tuple(ResourceRequest(i, resource, host=host, relax_locality=False)
                     for i, (resource, host) in enumerate(asks, start=1))
    granted = rm.allocate(AllocateRequest(app, 1, asks=requests)).allocated
    return app, sorted(granted, key=lambda c: c.request_id)
