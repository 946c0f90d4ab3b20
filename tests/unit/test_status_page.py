"""The status page (``/``), read back with the standard library's HTML parser: a row per
gang with its state, attempt, tasks and hosts; under a waiting gang the words ``gangmaster
why`` prints; everything from job files and the cluster escaped; it reloads itself only
while a job runs. (tests/e2e/test_status_page_live.py loads it from a live run in Chromium.)"""
from __future__ import annotations

import pytest
from status_page_reader import Page

from gangmaster.am.ops.status_page import REFRESH_S, render_page
from gangmaster.am.ops.why_text import format_why

EVIL = "<script>alert(1)</script>"


def attempt(gang, number, started_at=None, outcome="", hosts=()):
    return {"gang": gang, "attempt": number, "waiting_since": 0.0, "started_at": started_at, "ended_at": None,
            "outcome": outcome, "reason": "", "releases": 0, "reselections": 0,
            "tasks": [{"host": h, "state": "succeeded" if outcome else "running"} for h in hosts]}


DIAGNOSIS = {"hint": "free GPUs on " + EVIL, "roles": {"worker": {
    "needed": 4, "placeable": 0, "shortfall": 4, "asked": {"gpus": 1},
    "reasons": [{"code": "gpus-exhausted", "waiting_helps": True, "detail": "2 machine(s) with GPUs exhausted"}]}}}
WAITING = {"worker": {"waiting_s": 12.5, "reason": "0/4 granted", "diagnosis": DIAGNOSIS}}


@pytest.mark.parametrize("job, rows", [
    # a running gang: its tasks by state and its hosts, sorted, once each
    ({"job": "train", "app_id": "app_0001", "outcome": None, "waiting": {},
      "attempts": [attempt("worker", 1, 1.0, hosts=("n-1", "n-0", "n-1"))]},
     [("gang running", ["worker", "running", "1", "3 running", "n-0 n-1"])]),
    # the latest attempt of a restarted gang; an ended one; a gang /why says waits with no attempt yet
    ({"job": "train", "app_id": "app_0001", "outcome": None, "waiting": {},
      "attempts": [attempt("a", 1, 1.0, "failed", ("n-0",)), attempt("b", 1, 1.0, "succeeded", ("n-2",)),
                   attempt("a", 2, 9.0, hosts=("n-1",))]},
     [("gang running", ["a", "running", "2", "1 running", "n-1"]),
      ("gang succeeded", ["b", "succeeded", "1", "1 succeeded", "n-2"])]),
])
def test_a_row_per_gang_with_state_attempt_tasks_and_hosts(job, rows):
    assert Page(render_page([job])).rows == rows


def test_a_waiting_gang_shows_the_words_gangmaster_why_prints_and_markup_stays_text():
    job = {"job": EVIL, "app_id": "app_0002", "outcome": None, "waiting": WAITING,
           "attempts": [attempt("worker", 1)]}
    html = render_page([job])
    page = Page(html)
    assert "script" not in page.tags                      # the name is text, not an element
    assert page.rows == [("gang waiting", ["worker", "waiting", "1", "none started", "–"]),
                         ("why", [format_why([job])])]
    assert f"job {EVIL} (app_0002): gang worker has waited 12.5s" in page.rows[1][1][0]
    assert f"to unblock: free GPUs on {EVIL}" in page.rows[1][1][0]
    assert EVIL not in html


@pytest.mark.parametrize("outcomes, refresh", [
    ((None, "succeeded"), str(REFRESH_S)),   # one job still runs: the page reloads
    (("failed", "succeeded"), None),          # every job ended: it stops
    ((), None),
])
def test_it_reloads_only_while_a_job_runs(outcomes, refresh):
    jobs = [{"job": f"j{i}", "app_id": f"app_{i}", "outcome": o, "waiting": {}, "attempts": []}
            for i, o in enumerate(outcomes)]
    assert Page(render_page(jobs)).refresh == refresh
