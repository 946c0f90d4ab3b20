"""The AM's live status page, ``/`` beside ``/metrics`` and ``/why``: every gang of every
job with its state, attempt, tasks and hosts, and under a waiting gang why it waits, in
the words ``gangmaster why`` prints (:func:`~gangmaster.am.ops.why_text.format_why`: one
renderer for both).

A page of plain HTML that reloads itself every :data:`REFRESH_S` seconds while a job
runs (``<meta http-equiv="refresh">``) and stops once every job has ended. No
JavaScript: fetching /why and redrawing in the browser would need the diagnosis rendered
a second time, in JavaScript, and a page this small reloads in a millisecond.

Job names, roles, hosts and diagnoses come from job files and the cluster: every one is
HTML-escaped (a job named ``<script>`` shows as text)."""
from __future__ import annotations

import time
from collections import Counter
from html import escape

from .why_text import format_why

#: Seconds between reloads of the page while a job runs.
REFRESH_S = 5

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .2em; } h2 { font-size: 1.1em; margin: 1.2em 0 .4em; }
p.meta { color: #666; margin: 0 0 1em; }
table { border-collapse: collapse; width: 100%; max-width: 80em; table-layout: fixed; }
th, td { text-align: left; padding: .3em .8em; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f4f4f4; }
td.state { font-weight: 600; }
tr.waiting td.state { color: #b36b00; } tr.running td.state { color: #1a7f37; }
tr.failed td.state, tr.stopped td.state { color: #c62828; } tr.succeeded td.state { color: #555; }
tr.why td { border-bottom: 1px solid #ddd; background: #fffaf0; }
pre { margin: 0; font: 12.5px/1.35 ui-monospace, monospace; white-space: pre-wrap; }
"""


def render_page(jobs: list[dict], now: float | None = None) -> str:
    """The page for ``jobs``: each one what ``/why`` serves of it (``why_report``) with
    ``"attempts"``, its gangs' attempts so far (``AttemptRecord.to_dict``, in the order
    ``ApplicationMaster.history`` gives them)."""
    running = any(not job.get("outcome") for job in jobs)
    stamp = time.strftime("%H:%M:%S UTC", time.gmtime(time.time() if now is None else now))
    refresh = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if running else ""
    how = f"reloads every {REFRESH_S} s" if running else "every job has ended: no more reloads"
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">', refresh,
             f"<title>gangmaster: {len(jobs)} job{'s' if len(jobs) != 1 else ''}</title>",
             f"<style>{_STYLE}</style></head><body>", "<h1>gangmaster</h1>",
             f'<p class="meta">as of {stamp}; {how}; also <a href="/why">/why</a> (JSON) and '
             f'<a href="/metrics">/metrics</a></p>']
    if not jobs:
        parts.append("<p>No job yet.</p>")
    for job in jobs:
        parts.extend(_job_section(job))
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p)


def _job_section(job: dict) -> list[str]:
    outcome = job.get("outcome") or "in progress"
    lines = [f'<section class="job" data-job="{escape(job["job"])}">',
             f"<h2>job {escape(job['job'])} ({escape(job['app_id'])}): {escape(outcome)}</h2>",
             '<table><colgroup><col style="width: 14%"><col style="width: 10%"><col style="width: 8%">'
             '<col style="width: 18%"><col></colgroup>',
             "<thead><tr><th>gang</th><th>state</th><th>attempt</th><th>tasks</th><th>hosts</th></tr></thead><tbody>"]
    waiting = job["waiting"]
    for gang, attempt in _latest_attempts(job.get("attempts", []), waiting).items():
        state = "waiting" if gang in waiting else _state(attempt)
        tasks = attempt["tasks"] if attempt else []
        hosts = sorted({t["host"] for t in tasks})
        lines.append(f'<tr class="gang {state}" data-gang="{escape(gang)}"><td>{escape(gang)}</td>'
                     f'<td class="state">{state}</td><td>{attempt["attempt"] if attempt else ""}</td>'
                     f"<td>{escape(_tasks(tasks))}</td><td>{escape(' '.join(hosts)) or '–'}</td></tr>")
        if gang in waiting:
            words = format_why([{**job, "waiting": {gang: waiting[gang]}}])
            lines.append(f'<tr class="why" data-gang="{escape(gang)}"><td colspan="5"><pre>{escape(words)}</pre>'
                         "</td></tr>")
    lines.append("</tbody></table></section>")
    return lines


def _latest_attempts(attempts: list[dict], waiting: dict) -> dict[str, dict | None]:
    """Each gang's latest attempt, gangs in the order they first appear; a gang /why says
    waits that has no attempt yet, with None."""
    latest: dict[str, dict | None] = {}
    for attempt in attempts:
        known = latest.get(attempt["gang"])
        if known is None or attempt["attempt"] >= known["attempt"]:
            latest[attempt["gang"]] = attempt
    for gang in waiting:
        latest.setdefault(gang, None)
    return latest


def _state(attempt: dict | None) -> str:
    """How the attempt ended; else running once every task started, waiting before."""
    if attempt is None:
        return "waiting"
    return attempt["outcome"] or ("running" if attempt["started_at"] is not None else "waiting")


def _tasks(tasks: list[dict]) -> str:
    """``4 running``, ``3 succeeded, 1 failed``: the attempt's tasks by state."""
    if not tasks:
        return "none started"
    return ", ".join(f"{n} {state}" for state, n in Counter(t["state"] for t in tasks).items())
