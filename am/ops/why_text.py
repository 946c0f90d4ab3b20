"""The words for what ``/why`` serves: each job, each gang still waiting, how long, and
its diagnosis (per role: needed, placeable, shortfall, the reasons and whether waiting
helps; the hint). One renderer for every reader: ``gangmaster why`` prints it, the
status page (:mod:`.status_page`) shows it under a waiting gang."""
from __future__ import annotations

from gangmaster.am.core.reservation_plan import expected_start_line

from .diagnosis import will_preempt_line


def format_why(jobs: list[dict]) -> str:
    """``jobs``: the entries of a /why answer (``ApplicationMaster.why_report``), as
    ``tools.why_cmd.read_answer`` checked them."""
    lines = []
    for job in jobs:
        head = f"job {job['job']} ({job['app_id']})"
        if not job["waiting"]:
            lines.append(f"{head}: no gang waits" + (f" (job {job['outcome']})" if job.get("outcome") else ""))
            continue
        for gang, state in job["waiting"].items():
            lines.append(f"{head}: gang {gang} has waited {state['waiting_s']:g}s")
            diagnosis = state.get("diagnosis")
            if diagnosis is None:
                lines.append(f"  {state['reason'] or 'being granted'} (diagnosed after am.explain_after_s)")
                continue
            for name, role in diagnosis["roles"].items():
                asked = ", ".join(f"{k}={v:g}" for k, v in role["asked"].items())
                lines.append(f"  {name}: needed {role['needed']}, placeable {role['placeable']}, "
                             f"shortfall {role['shortfall']} (each asks {asked})")
                for reason in role["reasons"]:
                    helps = "waiting helps" if reason["waiting_helps"] else "waiting does not help"
                    lines.append(f"    {reason['code']}: {reason['detail']} ({helps})")
            if diagnosis.get("preempts"):
                lines.append(f"  {will_preempt_line(diagnosis['preempts'], diagnosis['preemption_grace_s'])}")
            if diagnosis["hint"]:
                lines.append(f"  to unblock: {diagnosis['hint']}")
            if diagnosis.get("expected_start") is not None:
                lines.append(f"  {diagnosis['expected_start']['line']}")
            elif "expected_start" in diagnosis:
                lines.append(f"  {expected_start_line(None, 0.0)}")
    return "\n".join(lines)
