"""One heartbeat of the AM's conversation with the RM (am/core/rm_conversation.py): the
callbacks plan and make the request, each item of the answer is handed to them in the
answer's order, and they act on the whole answer last; once they say the job must end,
nothing more is sent or handed out; an RM that no longer accepts the AM attempt is told
to them instead."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from gangmaster.am.core.rm_conversation import RMConversation
from gangmaster.protocol.rm_protocol import AllocateRequest, AllocateResponse, WrongState


class Recording:
    """Callbacks that record what they are told; ``done_after``: the call after which the job must end."""

    def __init__(self, done_after: str = ""):
        self.calls: list[str] = []
        self.done_after = done_after

    @property
    def done(self) -> bool:
        return self.done_after in self.calls

    def __getattr__(self, name: str):
        if not name.startswith(("on_", "before_", "after_")):
            raise AttributeError(name)
        return lambda *args: self.calls.append(name)

    def request(self) -> AllocateRequest:
        self.calls.append("request")
        return AllocateRequest("app_0001", 1)


class RM:
    """Answers each allocate with ``answer``, or raises it; the application's report is ``report``."""

    def __init__(self, answer, report=None):
        self.answer, self.report, self.sent = answer, report, []

    def register(self, app_id):
        return SimpleNamespace(attempt=1)

    def allocate(self, request):
        self.sent.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def application_report(self, app_id):
        return self.report


ANSWER = AllocateResponse(allocated=("c1",), rejected=("r1",), pending=("p1",), completed=("s1",),
                          node_updates=("n1",))


def test_a_heartbeat_plans_asks_hands_out_the_answer_in_order_then_acts_on_it():
    rm, callbacks = RM(ANSWER), Recording()
    assert RMConversation(rm, "app_0001").heartbeat(callbacks, 1.0)
    assert callbacks.calls == ["before_heartbeat", "request", "on_nodes_updated", "on_containers_allocated",
                               "on_requests_rejected", "on_requests_pending", "on_containers_completed",
                               "after_heartbeat"]
    assert len(rm.sent) == 1


@pytest.mark.parametrize("done_after, told", [
    ("before_heartbeat", ["before_heartbeat"]),   # a gang waited too long: nothing is sent
    ("on_requests_rejected", ["before_heartbeat", "request", "on_nodes_updated", "on_containers_allocated",
                              "on_requests_rejected"]),   # an ask can never be granted: the rest is not read
], ids=["before-sending", "mid-answer"])
def test_once_the_job_must_end_nothing_more_is_sent_or_handed_out(done_after, told):
    rm, callbacks = RM(ANSWER), Recording(done_after)
    assert RMConversation(rm, "app_0001").heartbeat(callbacks, 1.0)
    assert callbacks.calls == told
    assert len(rm.sent) == (0 if done_after == "before_heartbeat" else 1)


@pytest.mark.parametrize("finished", [True, False], ids=["application-ended", "newer-attempt"])
def test_an_rm_that_no_longer_accepts_the_attempt_is_told_instead_of_an_answer(finished):
    ended = SimpleNamespace(state=SimpleNamespace(finished=finished))
    told = []
    callbacks = Recording()
    callbacks.on_shutdown_request = lambda report, why: told.append((report, str(why)))
    rm = RM(WrongState("attempt 1 is not the current one"), report=ended)
    assert not RMConversation(rm, "app_0001").heartbeat(callbacks, 1.0)
    assert callbacks.calls == ["before_heartbeat", "request"]
    assert told == [(ended if finished else None, "attempt 1 is not the current one")]
