"""The RM's reasons cross the protocol as numbered codes with parameters, worded in one place
(``protocol/reasons.py``): every code renders and survives the wire and the RM's state file, an
old peer's text reads as OTHER, and no module outside the catalogue words a reason for the wire
or decides by parsing one."""
import ast
import re

import pytest

from layers import LAYERS, ROOT
from gangmaster.protocol.proto import rm_pb2 as pb
from gangmaster.protocol.reasons import (
    CAUSED, NO_REASON, PARAMETERS, TYPES, Reason, ReasonCode, from_saved, other, reason, render, to_saved)
from gangmaster.protocol.rm_codec import allocate_response_from_pb, allocate_response_to_pb
from gangmaster.protocol.rm_protocol import AllocateResponse, InvalidRequest, PendingAsk, PreemptionMessage, Rejection

SAMPLE = {str: "s-{k}", int: 7, float: 2.5}


def sample(code: ReasonCode) -> Reason:
    """``code`` with a value of each parameter's type (each text a different one), and a
    node's reason within it where it wraps one."""
    args = tuple(SAMPLE[t].format(k=k) if t is str else SAMPLE[t] + k for k, t in enumerate(TYPES[code]))
    return Reason(code, args, reason(ReasonCode.GPUS_TAKEN, host="h-9", taken=1, mask=3) if code in CAUSED else None)


def test_every_code_has_its_parameters_and_words():
    assert set(PARAMETERS) == set(TYPES) == set(ReasonCode)
    assert all(t in (str, int, float) for types in TYPES.values() for t in types)


@pytest.mark.parametrize("code", list(ReasonCode), ids=lambda c: c.name)
def test_each_code_renders_and_round_trips_the_codec_and_the_state_file(code):
    r = sample(code)
    text = render(r)
    assert str(r) == text and isinstance(text, str) and bool(text) == (code is not ReasonCode.NONE)
    shown = {name: a for name, a in r.params.items()
             if isinstance(a, str) and not (name == "rack" and r.params.get("host"))}
    assert all(a in text for a in shown.values())   # every text parameter is shown (a rack where no host is)
    assert r.cause is None or str(r.cause) in text
    response = AllocateResponse(rejected=(Rejection(1, r),), pending=(PendingAsk(2, 1, r),),
                                preemption=PreemptionMessage(("c1",), 5.0, r))
    msg = allocate_response_to_pb(response)
    assert msg.rejected[0].reason == msg.pending[0].reason == msg.preemption.reason == text   # for an old peer
    back = allocate_response_from_pb(pb.AllocateResponse.FromString(msg.SerializeToString()))
    assert back == response and back.rejected[0].reason.code is code and back.pending[0].reason.cause == r.cause
    assert from_saved(to_saved(r)) == r


@pytest.mark.parametrize("why, text, expected", [
    (None, "", NO_REASON),                                                   # an old peer, no reason
    (None, "host dgx-000 is LOST", other("host dgx-000 is LOST")),           # an old peer's words
    ((999, ["x"]), "a newer peer's words", other("a newer peer's words")),   # a code this side does not know
    ((ReasonCode.BLACKLISTED, ["dgx-001"]), "node dgx-001 is blacklisted",
     reason(ReasonCode.BLACKLISTED, host="dgx-001")),
])
def test_a_reason_without_a_known_code_reads_as_its_text(why, text, expected):
    msg = pb.AllocateResponse()
    j = msg.rejected.add(request_id=1, reason=text)
    if why is not None:
        j.why.code = why[0]
        j.why.args.extend(why[1])
    assert allocate_response_from_pb(msg).rejected[0].reason == expected


@pytest.mark.parametrize("code, args, error", [
    (ReasonCode.BLACKLISTED, [], "rejected[0].why.args: expected 1 parameter(s) for BLACKLISTED, got 0"),
    (ReasonCode.GPUS_SHORT, ["h", "x", "1"], "rejected[0].why.args[1]: expected int, got 'x'"),
    (ReasonCode.OTHER, ["a\x00b"], "rejected[0].why.args[0]: expected no NUL character"),
    (ReasonCode.NO_NODE_FREE_BECAUSE, ["", "r1", "gpus=1"],
     "rejected[0].why.cause: expected the reason within NO_NODE_FREE_BECAUSE, got none"),
])
def test_a_reason_with_bad_parameters_is_refused_naming_the_field(code, args, error):
    msg = pb.AllocateResponse()
    msg.rejected.add(request_id=1).why.args.extend(args)
    msg.rejected[0].why.code = code
    with pytest.raises(InvalidRequest, match=re.escape(error)):
        allocate_response_from_pb(msg)


def test_text_alone_cannot_cross_the_wire():
    with pytest.raises(TypeError, match="as a Reason"):
        allocate_response_to_pb(AllocateResponse(rejected=(Rejection(1, "words built elsewhere"),)))


def test_a_state_file_before_the_codes_keeps_its_text():
    assert from_saved(["queue q is full"]) == other("queue q is full")


# ------------------------------------------------------------------ where reasons are worded
WIRE_MESSAGES = {"Rejection": 1, "PendingAsk": 2, "PreemptionMessage": 2}   # the reason's position
RM_SIDE = ("tools/rmsim", "tools/yarn/client.py", "tools/slurm/client.py", "tools/replay/preempting.py")


def _worded(node: ast.AST) -> bool:
    """Whether ``node`` builds text: a string literal, an f-string, text joined by ``+``."""
    return (isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))
            or (isinstance(node, ast.BinOp) and (_worded(node.left) or _worded(node.right))))


def _last_said(node: ast.AST) -> ast.AST:
    """What ``a or b`` gives when ``a`` is empty (an operator's text, else the RM's own)."""
    return node.values[-1] if isinstance(node, ast.BoolOp) else node


def _protocol_names(tree: ast.AST) -> set[str]:
    """The wire's message classes a module imports from the protocol."""
    return {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and (n.module or "").endswith("rm_protocol") for a in n.names if a.name in WIRE_MESSAGES}


def wording_outside_the_catalogue(source: str, path: str) -> list[str]:
    """Where ``source`` words a reason for the wire (a message's reason, or on the RM's side
    a ``.reason`` or ``why_*`` answer, given as text) or decides by reading one's text."""
    found = [f"{path}:{source.count(chr(10), 0, m.start()) + 1}: decides by reading a reason's text"
             for m in PARSES.finditer(source)]
    rm_side = path.startswith(RM_SIDE)
    may_word = rm_side and any(w in source for w in ("reason", "def why_", ".preempt("))
    if not may_word and not any(f"{name}(" in source for name in WIRE_MESSAGES):
        return found   # (parsed only where a reason may be worded: the check stays cheap)
    tree = ast.parse(source)
    names = _protocol_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            k = WIRE_MESSAGES[node.func.id]
            given = [node.args[k]] if len(node.args) > k else []
            given += [w.value for w in node.keywords if w.arg == "reason"]
            found += [f"{path}:{node.lineno}: {node.func.id}'s reason worded here" for g in given if _worded(g)]
        elif (rm_side and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "preempt" and len(node.args) > 2 and _worded(_last_said(node.args[2]))):
            found.append(f"{path}:{node.lineno}: a preemption's reason worded here")
        elif rm_side and isinstance(node, ast.Assign) and _worded(node.value) and any(
                isinstance(t, ast.Attribute) and t.attr == "reason" for t in node.targets):
            found.append(f"{path}:{node.lineno}: a reason worded here")
        elif rm_side and isinstance(node, ast.FunctionDef) and node.name.startswith(("why_", "_pending_reason")):
            found += [f"{path}:{r.lineno}: {node.name} words its reason" for r in ast.walk(node)
                      if isinstance(r, ast.Return) and r.value is not None and _worded(r.value)]
    return found


#: a decision by a reason's text: searching in it, or taking it apart
PARSES = re.compile(r"\bin [\w.\[\]]*reason\b(?![(.])|reason\.(startswith|endswith|split|partition|find|index)\(")


def test_no_module_outside_the_catalogue_words_a_reason_for_the_wire():
    found = []
    for path in sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative != "protocol/reasons.py" and not relative.endswith("_pb2.py"):
            found += wording_outside_the_catalogue(path.read_text(), relative)
    assert found == []


@pytest.mark.parametrize("source, path, caught", [
    ("from gangmaster.protocol.rm_protocol import Rejection\nRejection(1, f'host {h} is down')\n", "am/x.py", True),
    ("from gangmaster.protocol.rm_protocol import PendingAsk\nPendingAsk(1, 1, reason='x' + y)\n", "tools/x.py", True),
    ("from gangmaster.protocol.rm_protocol import Rejection\nRejection(1, reason(C.X, host=h))\n", "am/x.py", False),
    ("from gangmaster.selectors.explanation import Rejection\nRejection('f', 'gpus', 'k', 1)\n", "am/x.py", False),
    ("ask.reason = f'queue {q} is full'\n", "tools/rmsim/scheduler.py", True),
    ("def why_never(self):\n    return f'host {h} is small'\n", "tools/rmsim/asks.py", True),
    ("def why_never(self):\n    return reason(C.X)\n", "tools/rmsim/asks.py", False),
    ("rm.preempt(app, 30, f.text or f'preempted ({origin})')\n", "tools/rmsim/faults.py", True),
    ("rm.preempt(app, 30, f.text or reason(C.X, origin=origin))\n", "tools/rmsim/faults.py", False),
    ("if 'GPUs' in slot.pending_reason:\n    pass\n", "am/core/x.py", True),
    ("if rejection.reason.startswith('host'):\n    pass\n", "am/core/x.py", True),
    ("if rej.reason not in RESOURCES:\n    pass\n", "am/ops/x.py", False),
])
def test_the_check_sees_a_reason_worded_or_parsed(source, path, caught):
    assert bool(wording_outside_the_catalogue(source, path)) == caught
