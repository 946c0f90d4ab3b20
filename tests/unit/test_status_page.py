"""The status page (``/``), read back with the standard library's HTML parser: a row per
gang with its state, attempt, tasks and hosts; under a waiting gang the words ``gangmaster
why`` prints; everything from job files and the cluster escaped; it reloads itself only
while a job runs. (tests/e2e/test_status_page.py loads it from a live run in Chromium.)"""
from __future__ import annotations

from html.parser import HTMLParser

import pytest

from gangmaster.am.status_page import REFRESH_S, render_page
from gangmaster.am.why_text import format_why

EVIL = "<script>alert(1)</script>"


class Page(HTMLParser):
    """The elements opened, each gang row's cells as text, each why row's text, the meta refresh."""

    def __init__(self, html: str):
        super().__init__()
        self.tags: list[str] = []
        self.rows: list[tuple[str, list[str]]] = []   # (the row's class, its cells' text)
        self.refresh: str | None = None
        self._row: list[str] | None = None
        self._in_cell = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "meta" and attrs.get("http-equiv") == "refresh":
            self.refresh = attrs["content"]
        elif tag == "tr" and (attrs.get("class") or "").split()[:1] in (["gang"], ["why"]):
            self._row = []
            self.rows.append((attrs["class"], self._row))
        elif tag == "td" and self._row is not None:
            self._row.append("")
            self._in_cell = True

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_cell = False
        elif tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._in_cell and self._row is not None:
            self._row[-1] += data


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
