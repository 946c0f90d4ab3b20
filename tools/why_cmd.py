"""``gangmaster why --address HOST:PORT``: ask a running AM why its gangs wait.

The AM serves its diagnoses as JSON at ``/why`` beside ``/metrics`` (``gangmaster run
--metrics-port``); several jobs of one run share the endpoint, one entry each.

Whatever answers at the address is outside input: the request is bounded as a whole
(``--timeout``, MAX_WHY_ANSWER_BYTES; :mod:`.http_fetch`) and the answer's shape is
checked once, by :func:`read_answer`, before anything reads it. An answer that is not a
diagnosis exits 2 like an address that does not answer, never 1 ("some gang waits")."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gangmaster.conf.fields import ConfigError, Fields
from gangmaster.conf.limits import MAX_WHY_ANSWER_BYTES
from gangmaster.tools.arg_types import address, seconds
from gangmaster.am.ops.why_text import format_why
from gangmaster.tools.http_fetch import FetchError, fetch


def add_parser(sub):
    parser = sub.add_parser(
        "why", help="ask a running AM why its gangs are pending (its /why endpoint)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fetch http://HOST:PORT/why from a running `gangmaster run` or `gangmaster am` started with "
                    "--metrics-port, and print, for each job and each gang still waiting, how long it has waited "
                    "and its diagnosis (per role: needed, placeable, shortfall, reasons and whether waiting "
                    "helps, the jobs holding the capacity, the hint). A gang is diagnosed once it has waited "
                    "am.explain_after_s (conf/defaults.yaml); before that only its one-line reason is shown.",
        epilog="Exit status: 0 nothing waits, 1 some gang waits, 2 the address is bad, or does not answer with a "
               "diagnosis within --timeout (not HTTP, not status 200, more than MAX_WHY_ANSWER_BYTES, not the "
               "JSON an AM serves; the message says which).")
    parser.add_argument("--address", type=address, required=True, help="HOST:PORT of the AM's metrics endpoint")
    parser.add_argument("--job", help="only this job (by name)")
    parser.add_argument("--json", action="store_true", help="print the JSON as served")
    parser.add_argument("--timeout", type=seconds, default=10.0, help="seconds for the whole request, connecting to the last byte of the answer "
                                                          "(default 10)")
    parser.set_defaults(func=_run)
    return parser


def _run(args) -> int:
    url = f"http://{args.address}/why"
    try:
        body = fetch(args.address, "/why", args.timeout, MAX_WHY_ANSWER_BYTES, "MAX_WHY_ANSWER_BYTES")
        jobs = read_answer(_json(body), url)
    except (FetchError, ConfigError) as exc:
        reason = str(exc).removeprefix(f"{url}: ")
        print(f"gangmaster why: {url} did not answer with a diagnosis: {reason}", file=sys.stderr)
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


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FetchError(f"expected UTF-8 JSON, got a byte 0x{body[exc.start]:02x} at {exc.start:,}") from None
    except json.JSONDecodeError as exc:
        raise FetchError(f"expected JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:       # an integer of more digits than Python converts
        raise FetchError(f"expected JSON with numbers of sensible size ({str(exc).split(';')[0]})") from None
    except RecursionError:
        raise FetchError("expected JSON nested less deeply") from None


def read_answer(answer: Any, source: str) -> list[dict]:
    """The jobs of a /why answer, once its shape is checked: everything :func:`format_why`
    and the exit status read is there with its type (as ``am.master.why_report`` writes
    it), else a ConfigError naming the field (``jobs[0].waiting.worker.waiting_s``)."""
    jobs = Fields(answer, source).list_of_mappings("jobs")
    for job in jobs:
        job.string("job")
        job.string("app_id")
        _text(job, "outcome", nullable=True)
        for _gang, gang in _entries(job, "waiting"):
            gang.number("waiting_s")
            _text(gang, "reason")
            if gang.raw("diagnosis", None) is None:
                continue
            diagnosis = gang.mapping("diagnosis")
            _text(diagnosis, "hint")
            if diagnosis.raw("expected_start", None) is not None:
                _text(diagnosis.mapping("expected_start"), "line")
            if diagnosis.raw("preempts", None) is not None:
                for victim in diagnosis.list_of_mappings("preempts"):
                    victim.string("job")
                    victim.integer("priority")
                    for key in ("gpus", "lost_gpu_h"):   # (an AM before them did not send them)
                        if victim.raw(key, None) is not None:
                            victim.number(key, minimum=0)
                diagnosis.number("preemption_grace_s", minimum=0)
            for _role, role in _entries(diagnosis, "roles"):
                for key in ("needed", "placeable", "shortfall"):
                    role.integer(key)
                asked = _mapping(role, "asked")
                for resource in asked.keys():
                    asked.number(resource)
                for reason in role.list_of_mappings("reasons"):
                    reason.string("code")
                    reason.boolean("waiting_helps")
                    _text(reason, "detail")
    return [job.data for job in jobs]


def _mapping(fields: Fields, key: str) -> Fields:
    """A mapping that must be there, even if empty (``Fields.mapping`` takes a missing one as empty)."""
    fields.raw(key)
    return fields.mapping(key)


def _entries(fields: Fields, key: str) -> list[tuple[str, Fields]]:
    """The entries of a mapping of mappings that must be there, even if empty."""
    _mapping(fields, key)
    return list(fields.items(key))


def _text(fields: Fields, key: str, nullable: bool = False) -> None:
    """A string, maybe empty (``Fields.string`` wants one with text); ``nullable``: or
    null or missing."""
    value = fields.raw(key, None) if nullable else fields.raw(key)
    if value is not None and not isinstance(value, str):
        raise fields.error(key, "a string" + (" or null" if nullable else ""), value)
