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
