"""`gangmaster why` against servers that are not an AM, on a real local socket: whatever
answers, the command ends within --timeout (a trickle included) with exit 2 and one line
saying why the answer is no diagnosis — never a traceback, never exit 1 ("some gang
waits") — and a real diagnosis is still read and printed."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

import gangmaster.tools.why_cmd as why_cmd
from gangmaster.tools.cli import main


def http(body: bytes, status: str = "200 OK", length: int | None = None) -> bytes:
    """An HTTP answer of ``body``; ``length``: the Content-Length told (-1: none told)."""
    length = len(body) if length is None else length
    told = f"Content-Length: {length}\r\n" if length >= 0 else ""
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{told}Connection: close\r\n\r\n".encode() + body


class Server:
    """A local server answering every connection with ``answer``, ``chunk`` bytes at a time
    with ``pause_s`` between them; it stops sending when the client goes or the test ends."""

    def __init__(self, answer: bytes, chunk: int = 1 << 20, pause_s: float = 0.0):
        self.answer, self.chunk, self.pause_s = answer, chunk, pause_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                try:
                    connection.recv(65536)
                    for start in range(0, len(self.answer), self.chunk):
                        if self.stopped.wait(self.pause_s if start else 0):
                            return
                        connection.sendall(self.answer[start:start + self.chunk])
                except OSError:       # the client gave up
                    continue

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.listener.shutdown(socket.SHUT_RDWR)      # wakes the accept() (a close alone does not)
        self.listener.close()
        self.thread.join(5)


def why(capsys, address: str, timeout: float = 5.0) -> tuple[int, str, str]:
    code = main(["why", "--address", address, "--timeout", str(timeout)])
    out, err = capsys.readouterr()
    return code, out, err


DIAGNOSIS = {"roles": {"worker": {"needed": 2, "placeable": 1, "shortfall": 1, "asked": {"gpus": 4, "vcores": 8},
                                  "reasons": [{"code": "gpus-exhausted", "count": 1, "waiting_helps": True,
                                               "detail": "1 machine(s) with GPUs exhausted by other jobs"}]}},
             "blocking_jobs": [], "hint": "when job holder ends"}


def answer(**changes) -> bytes:
    """A /why answer as an AM writes it (one job, one waiting gang), with ``changes`` made to the job."""
    job = {"job": "waiter", "app_id": "app_0002", "outcome": None,
           "waiting": {"worker": {"waiting_s": 12.5, "reason": "1/2 granted", "diagnosis": DIAGNOSIS}}}
    job.update(changes)
    return json.dumps({"jobs": [job]}).encode()


#: What a server answered, and what the one line says of it.
NOT_A_DIAGNOSIS = {
    "random bytes": (b"\x8f\x00\x1b[2J\xfe no status line\r\n\x01\x02" * 8, "expected an HTTP answer, got BadStatusLine: "),
    "a closed connection": (b"", "expected an HTTP answer, got RemoteDisconnected"),
    "HTTP 404": (http(b"not found", "404 Not Found"), "HTTP 404 Not Found"),
    "HTML": (http(b"<html>hello</html>"), "expected JSON (Expecting value at line 1 column 1)"),
    "not UTF-8": (http(b'{"jobs": ["\xff"]}'), "expected UTF-8 JSON, got a byte 0xff at 11"),
    "a list": (http(b"[1,2,3]"), "(top level): expected a mapping, got a list"),
    "jobs a string": (http(b'{"jobs": "nope"}'), 'jobs: expected a list, got "nope"'),
    "a job of wrong types": (http(b'{"jobs": [{"job": 5, "gangs": "x"}]}'),
                             "jobs[0].job: expected a non-empty string, got 5"),
    "no waiting": (http(b'{"jobs": [{"job": "j", "app_id": "a"}]}'),
                   "jobs[0].waiting: expected a value (the field is required)"),
    "a NaN wait": (http(answer().replace(b"12.5", b"NaN")), "jobs[0].waiting.worker.waiting_s: expected a finite number"),
    "a reason not a string": (http(answer(waiting={"worker": {"waiting_s": 1, "reason": 7, "diagnosis": None}})),
                              "jobs[0].waiting.worker.reason: expected a string, got 7"),
    "roles missing": (http(answer(waiting={"worker": {"waiting_s": 1, "reason": "", "diagnosis": {"hint": ""}}})),
                      "jobs[0].waiting.worker.diagnosis.roles: expected a value"),
    "asked not numbers": (http(answer().replace(b'"gpus": 4', b'"gpus": "four"')),
                          'jobs[0].waiting.worker.diagnosis.roles.worker.asked.gpus: expected a number, got "four"'),
    "waiting_helps not a boolean": (http(answer().replace(b'"waiting_helps": true', b'"waiting_helps": "yes"')),
                                    'jobs[0].waiting.worker.diagnosis.roles.worker.reasons[0].waiting_helps: expected '
                                    'true or false, got "yes"'),
    "an expected start without its line": (
        http(answer().replace(b'"hint": "when job holder ends"', b'"hint": "", "expected_start": {"line": 3}')),
        "jobs[0].waiting.worker.diagnosis.expected_start.line: expected a string, got 3"),
    "a preempted job's priority not an integer": (
        http(answer().replace(b'"hint": "when job holder ends"',
                              b'"hint": "", "preempts": [{"job": "low", "priority": "high"}], "preemption_grace_s": 30')),
        'jobs[0].waiting.worker.diagnosis.preempts[0].priority: expected an integer, got "high"'),
    "a preempted job's work lost negative": (
        http(answer().replace(b'"hint": "when job holder ends"',
                              b'"hint": "", "preempts": [{"job": "low", "priority": 0, "lost_gpu_h": -1}], '
                              b'"preemption_grace_s": 30')),
        "jobs[0].waiting.worker.diagnosis.preempts[0].lost_gpu_h: expected a number >= 0, got -1"),
    "a huge integer": (http(b'{"jobs": [], "x": ' + b"9" * 5000 + b"}"), "expected JSON with numbers of sensible size"),
    "cut short": (http(b'{"jobs": []}', length=100), "the answer ended after 12 of its 100 bytes"),
}


@pytest.mark.parametrize("case", sorted(NOT_A_DIAGNOSIS))
def test_an_answer_that_is_not_a_diagnosis_exits_2_with_one_line(capsys, case):
    sent, reason = NOT_A_DIAGNOSIS[case]
    with Server(sent) as server:
        code, out, err = why(capsys, server.address)
    assert (code, out) == (2, ""), err
    head = f"gangmaster why: http://{server.address}/why did not answer with a diagnosis: "
    assert err.startswith(head + reason) and err.count("\n") == 1, err
    assert all(ch.isprintable() for ch in err.rstrip("\n")), err


@pytest.mark.parametrize("told", [True, False])
def test_an_answer_past_the_limit_is_not_read_on(capsys, monkeypatch, told):
    monkeypatch.setattr(why_cmd, "MAX_WHY_ANSWER_BYTES", 1000)
    body = b'{"jobs": []' + b" " * 5000 + b"}"
    with Server(http(body, length=len(body) if told else -1)) as server:
        code, _, err = why(capsys, server.address)
    assert code == 2
    expected = "expected an answer of at most 1,000 bytes (MAX_WHY_ANSWER_BYTES in conf/limits.py), got "
    assert expected + ("one of 5,012 bytes" if told else "more") in err, err


#: A server that trickles (1 byte every 0.2 s, for minutes): within the body, or within the headers.
TRICKLES = {
    "the body": http(b'{"jobs": []}' + b" " * 1000),
    "the headers": b"HTTP/1.1 200 OK\r\nX-Slow: " + b"x" * 1000,
}


@pytest.mark.parametrize("where", sorted(TRICKLES))
def test_timeout_bounds_the_whole_request_against_a_trickling_server(capsys, where):
    with Server(TRICKLES[where], chunk=1, pause_s=0.2) as server:
        started = time.monotonic()
        code, _, err = why(capsys, server.address, timeout=1)
        took = time.monotonic() - started
    assert took < 10, f"--timeout 1 took {took:.1f}s"         # 200 s without the deadline
    assert code == 2 and "did not answer with a diagnosis: no whole answer within 1s (--timeout)" in err, err


def test_a_diagnosis_is_read_and_printed_exit_1_when_a_gang_waits(capsys):
    with Server(http(answer(), length=-1), chunk=7) as server:     # no length told, in pieces: read to the end
        code, out, err = why(capsys, server.address)
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        "job waiter (app_0002): gang worker has waited 12.5s",
        "  worker: needed 2, placeable 1, shortfall 1 (each asks gpus=4, vcores=8)",
        "    gpus-exhausted: 1 machine(s) with GPUs exhausted by other jobs (waiting helps)",
        "  to unblock: when job holder ends"]
    told = {**DIAGNOSIS, "expected_start": {"in_s": 60, "machines": ["n0"], "waits_for": ["holder"],
                                            "known": "declared", "line": "expected to start in ~1m on 1 machine"}}
    with Server(http(answer(waiting={"worker": {"waiting_s": 12.5, "reason": "", "diagnosis": told}}))) as server:
        code, out, _ = why(capsys, server.address)
    assert out.splitlines()[-1] == "  expected to start in ~1m on 1 machine"   # issue 30: when it is expected to start
    preempting = {**DIAGNOSIS, "preempts": [{"job": "low", "priority": 0}], "preemption_grace_s": 30.0}
    with Server(http(answer(waiting={"worker": {"waiting_s": 12.5, "reason": "", "diagnosis": preempting}}))) as server:
        code, out, _ = why(capsys, server.address)
    assert "  will preempt job low (priority 0) in ~30 s grace" in out.splitlines()   # issue 30: whom it preempts
    preempting["preempts"] = [{"job": "new", "priority": 0, "gpus": 4, "lost_gpu_h": 0.25},   # in the RM's order
                              {"job": "old", "priority": 1, "gpus": 8, "lost_gpu_h": 16.0}]
    with Server(http(answer(waiting={"worker": {"waiting_s": 12.5, "reason": "", "diagnosis": preempting}}))) as server:
        code, out, _ = why(capsys, server.address)
    assert ("  will preempt job new (priority 0, 4 GPUs, 0.25 GPU-h of work), job old (priority 1, 8 GPUs, "
            "16 GPU-h of work) in ~30 s grace") in out.splitlines()
    with Server(http(answer(waiting={}, outcome="succeeded"))) as server:
        code, out, _ = why(capsys, server.address)
    assert (code, out) == (0, "job waiter (app_0002): no gang waits (job succeeded)\n")
