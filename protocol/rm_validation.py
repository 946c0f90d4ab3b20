"""The RM's input contract: every field a caller can send, checked against the
documented limits (``conf/limits.py``, RM section) before the RM acts on it.

Why here, and why the core calls it: the RM core is what a hostile or mistaken
request would exhaust (an ask for nothing with ``count=2**31-1`` granted empty
containers until memory ran out), and both clients reach the core — the in-process
client by direct calls, ``gangmaster rm serve`` after decoding a message
(:mod:`gangmaster.protocol.rm_codec` also bounds list lengths before it decodes them).
Checking at the core's entry points gives both the same typed error,
:class:`~gangmaster.protocol.rm_protocol.InvalidRequest`, naming the field, the value and
the limit; a call is checked whole before anything changes, so a refused call
changes nothing. The one call that acts on many things, ``start_containers``, is
checked whole for its shape and shared launch, then container by container as it
starts them; it stops at the first it refuses and says which.

What is refused: numbers that are not finite or outside their range, names with
control characters (a NUL in a host or an application name is never meant), NUL
in any text (it cannot reach a process's argv or environment), counts and sizes
past the limits, an ask for nothing (no memory, no vcores, no GPUs, no share of one), and a
share of a GPU (``gpu_milli``) outside 1..999 or with whole GPUs or more than one GPU named.
"""
from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from itertools import chain
from typing import Any, Iterable, NoReturn, Sequence

from gangmaster.conf import limits
from gangmaster.conf.limits import INT32
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.resources import ResourceDescriptor

from .rm_protocol import (
    AllocateRequest, ApplicationSubmission, ContainerLaunch, GangRole, InvalidRequest, LaunchContext,
    ResourceRequest, StartContainers,
)

INT64 = (-(2 ** 63), 2 ** 63 - 1)
UINT64_MAX = 2 ** 64 - 1
#: YARN's FinalApplicationStatus values an AM may unregister with.
FINAL_STATUSES = ("SUCCEEDED", "FAILED", "KILLED", "UNDEFINED")

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# ------------------------------------------------------------------ scalars
def check_name(value: Any, field: str) -> str:
    """A short identifier-like string: at most MAX_NAME_CHARS, no control characters."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{field}: expected a string, got {type(value).__name__}")
    if len(value) > limits.MAX_NAME_CHARS:
        raise InvalidRequest(f"{field}: expected at most {limits.MAX_NAME_CHARS} characters "
                             f"(MAX_NAME_CHARS), got {len(value)}")
    bad = _CONTROL.search(value)
    if bad:
        raise InvalidRequest(f"{field}: expected no control characters, got {bad.group()!r} at "
                             f"position {bad.start()}")
    return value


def check_text(value: Any, field: str, limit: int = limits.RM_MAX_TEXT_CHARS) -> str:
    """Free text (diagnostics): at most ``limit`` characters, no NUL."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{field}: expected a string, got {type(value).__name__}")
    if len(value) > limit:
        raise InvalidRequest(f"{field}: expected at most {limit} characters, got {len(value)}")
    if "\x00" in value:
        raise InvalidRequest(f"{field}: expected no NUL character, got one at position {value.index(chr(0))}")
    return value


def check_int(value: Any, field: str, minimum: int, maximum: int, limit_name: str = "") -> int:
    if type(value) is not int and (not isinstance(value, numbers.Integral) or isinstance(value, bool)):
        raise InvalidRequest(f"{field}: expected an integer, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        name = f" ({limit_name})" if limit_name else ""
        raise InvalidRequest(f"{field}: expected an integer in {minimum}..{maximum}{name}, got {value}")
    return int(value)


def check_number(value: Any, field: str, minimum: float, maximum: float, *,
                 exclusive_minimum: bool = False, limit_name: str = "") -> float:
    """A finite number in range (NaN and infinity are refused: they poison every sum)."""
    if type(value) is not float and (not isinstance(value, numbers.Real) or isinstance(value, bool)):
        raise InvalidRequest(f"{field}: expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise InvalidRequest(f"{field}: expected a finite number, got {value}")
    low_ok = value > minimum if exclusive_minimum else value >= minimum
    if not low_ok or value > maximum:
        low = f"> {minimum:g}" if exclusive_minimum else f">= {minimum:g}"
        name = f" ({limit_name})" if limit_name else ""
        raise InvalidRequest(f"{field}: expected a number {low} and <= {maximum:g}{name}, got {value:g}")
    return float(value)


def check_count(items: Sequence, field: str, limit: int, limit_name: str) -> None:
    """A list no longer than ``limit`` (checked before any item is looked at)."""
    check_total(len(items), field, limit, limit_name)


def check_total(entries: int, field: str, limit: int, limit_name: str) -> None:
    """At most ``limit`` entries (of one list, or of a shared and an own one together)."""
    if entries > limit:
        raise InvalidRequest(f"{field}: expected at most {limit} entries ({limit_name}), got {entries}")


def _names(items: Iterable, field: str) -> None:
    for k, item in enumerate(items):
        check_name(item, f"{field}[{k}]")


# ------------------------------------------------------------------ messages
def check_resource(r: Any, field: str) -> None:
    """An ask's resource: every dimension finite and bounded, and not an ask for nothing."""
    if not isinstance(r, ResourceDescriptor):
        raise InvalidRequest(f"{field}: expected a ResourceDescriptor, got {type(r).__name__}")
    check_int(r.memory_mb, f"{field}.memory_mb", 0, limits.MAX_MEMORY_MB, "MAX_MEMORY_MB")
    check_number(r.vcores, f"{field}.vcores", 0, limits.MAX_VCORES, limit_name="MAX_VCORES")
    check_int(r.gpus, f"{field}.gpus", 0, limits.MAX_GPUS_PER_NODE, "MAX_GPUS_PER_NODE")
    check_int(r.gpu_mask, f"{field}.gpu_mask", 0, UINT64_MAX)
    check_int(r.ports, f"{field}.ports", 0, limits.RM_MAX_PORTS, "RM_MAX_PORTS")
    check_count(r.port_ranges.ranges, f"{field}.port_ranges", limits.RM_MAX_PORT_RANGES, "RM_MAX_PORT_RANGES")
    check_share(r, field)
    # vcores are booked in milli-vcores: less than half of one books nothing.
    if r.memory_mb == 0 and round(r.vcores * 1000) == 0 and r.gpus == 0 and r.gpu_milli == 0:
        raise InvalidRequest(f"{field}: expected memory_mb, vcores, gpus or gpu_milli > 0 (an ask for nothing), "
                             f"got {r}")


def check_share(r: ResourceDescriptor, field: str) -> None:
    """A share of one GPU: 0 (none) or 1..999 milli-GPU, with no whole GPUs and at most one
    GPU named (a descriptor is built so; one made by hand past its checks is refused here)."""
    check_int(r.gpu_milli, f"{field}.gpu_milli", 0, GPU_MILLI - 1)
    if r.gpu_milli and (r.gpus or r.gpu_mask & (r.gpu_mask - 1)):
        raise InvalidRequest(f"{field}.gpu_milli: expected a share of one GPU (gpus 0, gpu_mask naming at most "
                             f"one GPU), got gpu_milli={r.gpu_milli} gpus={r.gpus} gpu_mask={r.gpu_mask:#x}")


def check_ask(a: Any, field: str) -> None:
    if not isinstance(a, ResourceRequest):
        raise InvalidRequest(f"{field}: expected a ResourceRequest, got {type(a).__name__}")
    check_int(a.request_id, f"{field}.request_id", 0, INT64[1])
    check_resource(a.resource, f"{field}.resource")
    check_int(a.count, f"{field}.count", 1, limits.RM_MAX_COUNT_PER_ASK, "RM_MAX_COUNT_PER_ASK")
    for key in ("host", "rack", "node_label"):
        value = getattr(a, key)
        if value is not None:
            check_name(value, f"{field}.{key}")
    check_int(a.priority, f"{field}.priority", *INT32)


def check_allocate(r: AllocateRequest) -> None:
    """An AM heartbeat, whole: ids, every ask, and every list within its limit."""
    check_name(r.app_id, "app_id")
    check_int(r.attempt, "attempt", 0, INT32[1])
    check_count(r.asks, "asks", limits.RM_MAX_ASKS_PER_CALL, "RM_MAX_ASKS_PER_CALL")
    for key in ("cancel", "releases", "blacklist_additions", "blacklist_removals"):
        check_count(getattr(r, key), key, limits.RM_MAX_IDS_PER_CALL, "RM_MAX_IDS_PER_CALL")
    for k, ask in enumerate(r.asks):
        check_ask(ask, f"asks[{k}]")
    for k, request_id in enumerate(r.cancel):
        check_int(request_id, f"cancel[{k}]", 0, INT64[1])
    for key in ("releases", "blacklist_additions", "blacklist_removals"):
        _names(getattr(r, key), key)
    check_number(r.progress, "progress", 0, 1)


def check_submission(s: ApplicationSubmission) -> None:
    check_name(s.name, "name")
    check_name(s.queue, "queue")
    check_int(s.max_attempts, "max_attempts", 1, limits.MAX_ATTEMPTS, "MAX_ATTEMPTS")
    check_int(s.priority, "priority", -limits.MAX_PRIORITY, limits.MAX_PRIORITY, "MAX_PRIORITY")
    if s.am_expiry_s is not None:
        check_number(s.am_expiry_s, "am_expiry_s", 0, limits.MAX_DURATION_S, exclusive_minimum=True,
                     limit_name="MAX_DURATION_S")
    check_gang(s.gang)
    if s.expected_duration_s is not None:
        check_number(s.expected_duration_s, "expected_duration_s", 0, limits.MAX_DURATION_S,
                     limit_name="MAX_DURATION_S")


def check_gang(gang: Any, field: str = "gang") -> None:
    """A declared gang: roles of named, bounded shapes, each asking something, MAX_INSTANCES_PER_JOB
    instances at most in all (the RM plans and places every one of them)."""
    if not isinstance(gang, tuple):
        raise InvalidRequest(f"{field}: expected a tuple of GangRole, got {type(gang).__name__}")
    check_count(gang, field, limits.MAX_INSTANCES_PER_JOB, "MAX_INSTANCES_PER_JOB")
    total = 0
    for k, role in enumerate(gang):
        where = f"{field}[{k}]"
        if not isinstance(role, GangRole):
            raise InvalidRequest(f"{where}: expected a GangRole, got {type(role).__name__}")
        check_name(role.name, f"{where}.name")
        total += check_int(role.instances, f"{where}.instances", 1, limits.MAX_INSTANCES_PER_JOB,
                           "MAX_INSTANCES_PER_JOB")
        check_int(role.gpus, f"{where}.gpus", 0, limits.MAX_GPUS_PER_NODE, "MAX_GPUS_PER_NODE")
        check_int(role.gpu_milli, f"{where}.gpu_milli", 0, GPU_MILLI - 1)
        if role.gpu_milli and role.gpus:
            raise InvalidRequest(f"{where}.gpu_milli: expected a share of one GPU (gpus 0), got "
                                 f"gpu_milli={role.gpu_milli} gpus={role.gpus}")
        check_number(role.vcores, f"{where}.vcores", 0, limits.MAX_VCORES, limit_name="MAX_VCORES")
        check_int(role.memory_mb, f"{where}.memory_mb", 0, limits.MAX_MEMORY_MB, "MAX_MEMORY_MB")
        if role.max_instances_per_node is not None:
            check_int(role.max_instances_per_node, f"{where}.max_instances_per_node", 1,
                      limits.MAX_INSTANCES_PER_JOB, "MAX_INSTANCES_PER_JOB")
        if role.memory_mb == 0 and round(role.vcores * 1000) == 0 and role.gpus == 0 and role.gpu_milli == 0:
            raise InvalidRequest(f"{where}: expected memory_mb, vcores, gpus or gpu_milli > 0 (a role asking "
                                 f"nothing), got {role}")
    check_total(total, f"{field} instances", limits.MAX_INSTANCES_PER_JOB, "MAX_INSTANCES_PER_JOB")


@dataclass(frozen=True)
class LaunchSize:
    """What a launch takes against the limits: arguments, variables, bytes in execve's block."""

    args: int = 0
    variables: int = 0
    bytes: int = 0


NO_LAUNCH = LaunchSize()


def check_launch(c: Any, field: str = "launch", shared: LaunchSize | None = None) -> LaunchSize:
    """What a NodeManager will start: something ``execve`` can take (no NUL, no ``=`` in a
    variable's name), within the argument and size limits. In a batch, ``shared`` is what
    the batch's shared launch already takes (:func:`check_start`): the limits hold for the
    two together (an argument or variable the container sets over a shared one counts
    twice, erring on the safe side). Returns what this launch takes with ``shared``."""
    if not isinstance(c, LaunchContext):
        raise InvalidRequest(f"{field}: expected a LaunchContext, got {type(c).__name__}")
    base = shared or NO_LAUNCH
    check_total(base.args + len(c.command), f"{field}.command", limits.RM_MAX_COMMAND_ARGS, "RM_MAX_COMMAND_ARGS")
    check_total(base.variables + len(c.env), f"{field}.env", limits.RM_MAX_ENV_VARS, "RM_MAX_ENV_VARS")
    size = base.bytes + _launch_text_bytes(c, field)
    if size > limits.RM_MAX_LAUNCH_BYTES:
        raise InvalidRequest(f"{field}: command and environment take {size} bytes, over the limit of "
                             f"{limits.RM_MAX_LAUNCH_BYTES} (RM_MAX_LAUNCH_BYTES)")
    return LaunchSize(base.args + len(c.command), base.variables + len(c.env), size)


def check_start(r: Any) -> LaunchSize:
    """A batch of starts, before any is tried: its length and its shared launch (checked
    once for the whole gang). Each container's own launch is checked in its turn
    (``check_launch(own, field, shared=<this>)``); returns what the shared launch takes."""
    if not isinstance(r, StartContainers):
        raise InvalidRequest(f"request: expected a StartContainers, got {type(r).__name__}")
    if not isinstance(r.containers, tuple):
        raise InvalidRequest(f"containers: expected a tuple, got {type(r.containers).__name__}")
    check_count(r.containers, "containers", limits.RM_MAX_CONTAINERS_PER_APP, "RM_MAX_CONTAINERS_PER_APP")
    for k, item in enumerate(r.containers):
        if not isinstance(item, ContainerLaunch):
            raise InvalidRequest(f"containers[{k}]: expected a ContainerLaunch, got {type(item).__name__}")
    return check_launch(r.shared, "shared")


_TUPLE, _PAIR = {tuple}, {2}


def _launch_text_bytes(c: LaunchContext, field: str) -> int:
    """The command and environment as ``execve`` takes them: strings without NUL, each
    variable NAME=value with a name; returns the bytes they take. The usual launch (ASCII
    text, well formed) is measured whole, in a few C-level passes; any other is walked
    field by field, which names the one at fault (or counts the bytes of non-ASCII text)."""
    env = c.env
    if set(map(type, env)) <= _TUPLE and set(map(len, env)) <= _PAIR:   # every one a (name, value) tuple
        texts = [*c.command, *chain.from_iterable(env)]
        try:
            blob = "".join(texts)
        except TypeError:   # something that is not text: the walk says where
            blob = None
        names = texts[len(c.command)::2]
        if blob is not None and blob.isascii() and "\x00" not in blob and "" not in names \
                and "=" not in "".join(names):
            return len(blob) + len(texts)   # each text's NUL; a variable's "=" stands where its name's NUL is
    return _walk_launch_text(c, field)


def _walk_launch_text(c: LaunchContext, field: str) -> int:
    size = 0
    for k, arg in enumerate(c.command):
        size += _execve_bytes(arg) or _refuse_text(arg, f"{field}.command[{k}]")
    for k, pair in enumerate(c.env):
        if type(pair) is not tuple or len(pair) != 2:
            raise InvalidRequest(f"{field}.env[{k}]: expected a (name, value) pair")
        name, value = pair
        size += _execve_bytes(name) or _refuse_text(name, f"{field}.env[{k}].name")
        if not name or "=" in name:
            raise InvalidRequest(f"{field}.env[{k}].name: expected a non-empty name without '=', got {name!r}")
        size += _execve_bytes(value) or _refuse_text(value, f"{field}.env[{k}].value ({name})")
    return size


def _execve_bytes(text: Any) -> int:
    """Bytes ``text`` takes in execve's block, its terminating NUL included (``NAME=value``:
    the ``=`` stands where the name's NUL is counted); 0 when it cannot be there at all."""
    if not isinstance(text, str) or "\x00" in text:
        return 0
    return (len(text) if text.isascii() else len(text.encode())) + 1   # isascii() is O(1)


def _refuse_text(text: Any, field: str) -> NoReturn:
    check_text(text, field, limits.RM_MAX_LAUNCH_BYTES)   # raises, naming what is wrong
    raise AssertionError(f"{field}: {text!r} is valid text")


def check_finish(app_id: Any, attempt: Any, final_status: Any, diagnostics: Any) -> None:
    check_name(app_id, "app_id")
    check_int(attempt, "attempt", 0, INT32[1])
    if final_status not in FINAL_STATUSES:
        raise InvalidRequest(f"final_status: expected one of {', '.join(FINAL_STATUSES)}, "
                             f"got {check_name(final_status, 'final_status')!r}")
    check_text(diagnostics, "diagnostics")
