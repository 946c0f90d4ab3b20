"""``gangmaster why --address HOST:PORT``: ask a running AM why its gangs wait.

The AM serves its diagnoses as JSON at ``/why`` beside ``/metrics`` (``gangmaster run
--metrics-port``); several jobs of one run share the endpoint, one entry each."""
from __future__ import annotations

import argparse
import json
import sys
from urllib.error import URLError
from urllib.request import urlopen

from gangmaster.tools.arg_types import address, seconds


def add_parser(sub):
    parser = sub.add_parser(
        "why", help="ask a running AM why its gangs are pending (its /why endpoint)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fetch http://HOST:PORT/why from a running `gangmaster run` or `gangmaster am` started with "
                    "--metrics-port, and print, for each job and each gang still waiting, how long it has waited "
                    "and its diagnosis (per role: needed, placeable, shortfall, reasons and whether waiting "
                    "helps, the jobs holding the capacity, the hint). A gang is diagnosed once it has waited "
                    "am.explain_after_s (conf/defaults.yaml); before that only its one-line reason is shown.",
        epilog="Exit status: 0 nothing waits, 1 some gang waits, 2 the address is bad or does not answer "
               "(the message says which).")
    parser.add_argument("--address", type=address, required=True, help="HOST:PORT of the AM's metrics endpoint")
    parser.add_argument("--job", help="only this job (by name)")
    parser.add_argument("--json", action="store_true", help="print the JSON as served")
    parser.add_argument("--timeout", type=seconds, default=10.0, help="seconds to wait for the answer (default 10)")
    parser.set_defaults(func=_run)
    return parser


def _run(args) -> int:
    url = f"http://{args.address}/why"
    try:
        with urlopen(url, timeout=args.timeout) as answer:
            jobs = json.loads(answer.read().decode())["jobs"]
    except (URLError, OSError, ValueError, KeyError) as exc:
        print(f"gangmaster why: {url} did not answer with a diagnosis: {exc}", file=sys.stderr)
        return 2
    if args.job:
        jobs = [j for j in jobs if j["job"] == args.job]
        if not jobs:
            print(f"gangmaster why: no job named {args.job!r} at {url}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps({"jobs": jobs}, indent=2))
    else:
        print(format_why(jobs))
    return 1 if any(j["waiting"] for j in jobs) else 0


def format_why(jobs: list[dict]) -> str:
    lines = []
    for job in jobs:
        head = f"job {job['job']} ({job['app_id']})"
        if not job["waiting"]:
            lines.append(f"{head}: no gang waits" + (f" (job {job['outcome']})" if job.get("outcome") else ""))
            continue
        for gang, state in job["waiting"].items():
            lines.append(f"{head}: gang {gang} has waited {state['waiting_s']:g}s")
            diagnosis = state["diagnosis"]
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
            if diagnosis["hint"]:
                lines.append(f"  to unblock: {diagnosis['hint']}")
    return "\n".join(lines)
