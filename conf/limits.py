"""Every documented limit on what gangmaster accepts, in one place.

Each limit exists so that a hostile or mistaken input is refused at once with a
message naming the limit, instead of exhausting memory, CPU or time. The README's
*Limits* section lists them; a test pins each one. Keep the value, its unit and the
reason together, one section per part of the system.
"""
from __future__ import annotations

# ------------------------------------------------ barrier coordinator (am/barrier*.py, am/context.py)
#: Default of ``barrier.max_message_bytes``: the most an all_gather may gather, in bytes —
#: every task's message together, each counted with 8 bytes of framing — and so the largest
#: single message too. gRPC's own default (4 MiB) made a larger gather fail as "coordinator
#: unreachable" after retrying for ``retry_give_up_s``; Spark's barrier mode allows 128 MiB
#: (``spark.rpc.message.maxSize``). Past it, the gather fails at once on every task, naming
#: the size and the limit. Enforced by the coordinator (am/barrier.py) and, for one task's
#: own message, by the task (am/context.py); both sides' gRPC channels allow it.
BARRIER_MAX_MESSAGE_BYTES = 128 * 1024 * 1024

#: The largest ``barrier.max_message_bytes`` accepts (bytes): gRPC message lengths are
#: 32-bit, and the coordinator builds each gathered reply in memory.
BARRIER_MAX_MESSAGE_BYTES_CEILING = 1024 * 1024 * 1024

#: Room above ``barrier.max_message_bytes`` on the gRPC channels (bytes), for everything
#: else in a request or reply (the caller's names and token, an error's text).
BARRIER_ENVELOPE_BYTES = 64 * 1024

#: Ended attempts (closed, superseded or failed) the coordinator remembers, oldest
#: forgotten first: their late ("zombie") calls get a typed "attempt ended" error; an
#: attempt forgotten before that is refused like a wrong token. A finished attempt's
#: state is dropped at once; what is kept is its token and why it ended (~1 KB each),
#: so a long-running AM's coordinator stays within a few MB.
BARRIER_ENDED_ATTEMPTS_KEPT = 4096

#: Seconds between log lines about refused calls (a wrong token, an unknown attempt):
#: the first refusal is logged, later ones are summarized with a count at most once per
#: this interval, so a token-guessing client cannot flood the coordinator's log.
BARRIER_REFUSAL_LOG_INTERVAL_S = 60.0


# ------------------------------------------------------------------ RM (ResourceManager API)
# Checked on every call into the RM core (am/rm_validation.py), so the in-process client
# and `gangmaster rm serve`'s gRPC clients meet the same limits; a call past one is refused
# with InvalidRequest / gRPC INVALID_ARGUMENT naming the field, the value and the limit.
# Sized so the largest job in the design (1 + 3,000 + 3,000 instances, one ask each) and
# `gangmaster bench rm` (20,000 containers held by one application) fit with room to spare.

#: Characters in a name: application name, queue, host, rack, node label, application and
#: container id, final status, fault action. 255, like a file name (a host name is <= 253).
RM_MAX_NAME_CHARS = 255
#: Characters of free text: diagnostics and a fault's text (a stack trace fits, a log does not).
RM_MAX_TEXT_CHARS = 64 * 1024
#: Asks in one allocate call (one per gang instance from the AM).
RM_MAX_ASKS_PER_CALL = 100_000
#: Entries in each of an allocate call's lists of ids: cancels, releases, blacklist changes.
RM_MAX_IDS_PER_CALL = 100_000
#: Containers one ask may request (its count).
RM_MAX_COUNT_PER_ASK = 100_000
#: Containers an application may hold and wait for at once (live containers plus the
#: remaining count of its pending asks): one call can never make the RM grant without end.
RM_MAX_CONTAINERS_PER_APP = 100_000
#: Memory of one ask, in MB (1 PiB): beyond any machine, and far from int64 overflow.
RM_MAX_MEMORY_MB = 2 ** 30
#: vcores of one ask (the RM books milli-vcores in int64).
RM_MAX_VCORES = 2 ** 20
#: GPUs one ask may name, by count or mask (a GPU mask is 64 bits on the wire).
RM_MAX_GPUS = 64
#: Ports one ask may request (by count or ranges): the whole port space.
RM_MAX_PORTS = 65536
#: Port ranges in one ask.
RM_MAX_PORT_RANGES = 1024
#: Arguments of a task's command, and variables in its environment.
RM_MAX_COMMAND_ARGS = 4096
RM_MAX_ENV_VARS = 4096
#: Bytes (UTF-8) of a task's command and environment together: half of Linux's usual
#: ARG_MAX (2 MiB), which also has to hold the NodeManager's own variables.
RM_MAX_LAUNCH_BYTES = 1024 * 1024
#: AM attempts an application may ask for (YARN's default maximum is 2).
RM_MAX_AM_ATTEMPTS = 100
#: Seconds in a duration the RM is given (am_expiry_s, a simulated task's duration_s): ten years.
RM_MAX_SECONDS = 10 * 365 * 86400
#: Applications submitted and not finished, at once.
RM_MAX_RUNNING_APPS = 10_000
#: Finished applications remembered for reports (YARN: max-completed-applications); past it
#: the oldest tenth are forgotten (their reports answer NOT_FOUND).
RM_MAX_COMPLETED_APPS = 10_000
#: Finished containers remembered for container_status; past it the oldest tenth are forgotten.
RM_MAX_FINISHED_CONTAINERS = 100_000
#: Bytes of one gRPC message to or from `gangmaster rm serve` (gRPC's default, 4 MiB, is
#: smaller than an allocate reply granting RM_MAX_CONTAINERS_PER_APP containers).
RM_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Characters of the RM's access token (read from --token-file).
RM_MAX_TOKEN_CHARS = 4096
#: Nodes in the RM's cluster (a node list of this size is about 15 MB on the wire).
RM_MAX_NODES = 100_000
