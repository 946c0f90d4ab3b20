"""The status page of a live run: ``gangmaster run --live --metrics-port 0`` on two jobs
on a two-machine cluster, one holding every GPU, the other's gang waiting for it (as
tests/e2e/test_diagnose.py's live /why test). ``/`` shows both gangs and, under the
waiting one, its diagnosis in the words ``gangmaster why`` prints; read as served (the
standard library's parser) and as headless Chromium builds it. The machines are named
``<script>alert(1)</script>-000``: markup from the cluster file stays text."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.request import urlopen

import pytest
from status_page_reader import Page
from job_texts import one_role_job
from task_procs import wait_until

from gangmaster.am.ops.why_text import format_why

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EVIL = "<script>alert(1)</script>"
CLUSTER = f"""
name: small
nodeGroups:
  - name: "{EVIL}"
    count: 2
    racks: [rack-0]
    gpuType: V100
    memoryMB: 65536
    vcores: 16
    gpus: 4
    ports: "20000-20099"
"""


def chromium() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """The base URL of the endpoint while ``holder`` runs and ``waiter``'s gang waits, diagnosed."""
    tmp = tmp_path_factory.mktemp("status")
    (tmp / "cluster.yaml").write_text(CLUSTER)
    (tmp / "holder.yaml").write_text(one_role_job("holder", 8, command="sleep 120"))
    (tmp / "waiter.yaml").write_text(one_role_job("waiter", 4, command="sleep 1"))
    (tmp / "am.yaml").write_text("am:\n  explain_after_s: 1\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gangmaster.tools.cli", "run", str(tmp / "holder.yaml"), str(tmp / "waiter.yaml"),
         "--live", "--cluster", str(tmp / "cluster.yaml"), "--config", str(tmp / "am.yaml"), "--metrics-port", "0",
         "--work-dir", str(tmp / "run"), "--timeout", "150", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        first = proc.stdout.readline()
        assert first.startswith("metrics: http://127.0.0.1:"), first + proc.stderr.read()
        base = first.split()[1].removesuffix("/metrics")

        def waiter_diagnosed() -> bool:
            jobs = json.loads(urlopen(base + "/why", timeout=5).read())["jobs"]
            return any(j["job"] == "waiter" and (j["waiting"].get("worker") or {}).get("diagnosis") for j in jobs)

        wait_until(waiter_diagnosed, 60, "waiter's gang to be diagnosed on /why")
        yield base
    finally:
        proc.kill()
        proc.communicate()


def expect_rows(page: Page, why: dict) -> None:
    """holder's gang runs on both machines; waiter's waits, its diagnosis in gangmaster why's words."""
    hosts = f"{EVIL}-000 {EVIL}-001"
    (holder, waiter, said) = page.rows
    assert holder == ("gang running", ["worker", "running", "1", "8 running", hosts])
    assert waiter == ("gang waiting", ["worker", "waiting", "1", "none started", "–"])
    assert said[0] == "why"
    words = said[1][0]
    # the same renderer as gangmaster why, but waited seconds move on between the two reads
    expected = format_why([j for j in why["jobs"] if j["job"] == "waiter"]).splitlines()
    assert words.splitlines()[1:] == expected[1:]
    assert words.startswith("job waiter (app_0002): gang worker has waited ")
    assert "gpus-exhausted: 2 machine(s) with GPUs exhausted by other jobs (need 1, most free 0) (waiting helps)" \
        in words
    assert "script" not in page.tags
    assert page.refresh == "5"


def test_the_page_as_served_shows_every_gang_and_why_one_waits(live_run):
    html = urlopen(live_run + "/", timeout=5).read().decode()
    why = json.loads(urlopen(live_run + "/why", timeout=5).read())
    expect_rows(Page(html), why)
    assert EVIL not in html


@pytest.mark.skipif(chromium() is None, reason="no chromium on PATH (apt-get install -y chromium): the page is "
                                               "checked as served only, by the test above")
def test_the_page_in_headless_chromium(live_run, tmp_path):
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu"]
    dom = subprocess.run([*browser, "--dump-dom", live_run + "/"], capture_output=True, text=True, timeout=60)
    assert dom.returncode == 0, dom.stderr
    why = json.loads(urlopen(live_run + "/why", timeout=5).read())
    expect_rows(Page(dom.stdout), why)
    shot = tmp_path / "page.png"
    drawn = subprocess.run([*browser, f"--screenshot={shot}", "--window-size=1200,900", live_run + "/"],
                           capture_output=True, text=True, timeout=60)
    assert drawn.returncode == 0, drawn.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
