"""``gangmaster bench barrier``: one ``barrier()`` round against a live coordinator.

The coordinator runs as the AM runs it (:class:`CompletionQueueBarrierServer`, one thread
of this process on gRPC's completion queue; ``--server aio``: grpc.aio's :class:`BarrierServer`,
its event loop in a thread). Task processes loop ``barrier()`` as fast as they can:

- N ≤ ``--max-process-tasks`` (64): every task its own process, using the real
  task API (:class:`BarrierTaskContext`: synchronous gRPC, one Session stream per task);
- larger N: many tasks per process (``--tasks-per-process``, 512), each a coroutine
  with its own Session stream on one ``grpc.aio`` channel, speaking the same protocol
  (thousands of threads would measure the client, not the coordinator).

That is the *flat* design: every task calls the coordinator. The *tree* (the default
design, ``--design tree``; ``both`` measures the two in one run) puts
``--tasks-per-host`` (8) tasks on each host (``GANGMASTER_BARRIER_LOCAL_GROUP``: the
tasks of one host meet at their leader, one of them, which sends the coordinator one
message per epoch for all of them; ``gangmaster.am.barrier.local``): up to 64 tasks
every task is its own process, beyond that every host is a process running its tasks
as two: its first task, the leader, a process with the real :class:`BarrierTaskContext`,
and its other tasks coroutines of a second process speaking the leader's local protocol
(as the flat design's many tasks are coroutines speaking gRPC; threads of one process
would make the leader wait for the GIL held by its host's tasks, which a real host, a
process per task, does not). "msgs": messages the
coordinator received per round (one per task flat, one per host in the tree).

Every task records when each of its calls returned (``time.monotonic_ns``, one
clock for all processes of this machine). A *round* is the time between the last
release of one epoch and the last release of the next; the *release skew* is first
to last release within an epoch. The baseline, measured in the same run by one
process: a bare gRPC unary round trip (``Ping``) to the same server; and, where each
task is a process, "N pings": the time the server needs to answer N bare unary calls
when N processes call at once (N / its throughput), and "N spings" the same for N bare
messages on N streams (``PingSession``, sent as the task API sends on its Session):
the floor for any coordinator on that gRPC transport with N task processes on this
machine. "srv us": CPU of this process (the coordinator's) per arrival, process
start-up and warm-up included. "Drops": calls the task side had to retry
(UNAVAILABLE, RESOURCE_EXHAUSTED …) and tasks that did not finish every round.
"floor ms" (tree): the same round in the same process layout over bare Unix sockets
(:mod:`gangmaster.tools.bench.barrier_floor`: a relay process per host, a hub for the
coordinator), what this machine at this load gives that shape at all; "x floor": the
round as a multiple of it.
"""
from __future__ import annotations

from gangmaster.tools.arg_types import count, counts
from gangmaster.tools.bench import barrier_floor
from gangmaster.tools.bench.cli import add_bench_parser

import argparse
import asyncio
import json
import logging
import math
import multiprocessing as mp
import os
import statistics
import time
from dataclasses import asdict, dataclass, field

from gangmaster.am.barrier.coordinator import TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.cq_server import CompletionQueueBarrierServer
from gangmaster.am.barrier.server import BarrierServer

DEFAULT_TASKS = (2, 8, 64, 512, 1024, 4096)
#: Targets from the issues, median round in ms (4,096: every round released, <= 2 s).
TARGETS_MS = {2: 1.5, 64: 20.0, 1024: 100.0, 4096: 2000.0}
DESIGNS = ("tree", "flat")
#: The coordinator's servers: grpc.aio's, and one thread on gRPC's completion queue.
SERVERS = {"aio": BarrierServer, "cq": CompletionQueueBarrierServer}
_PRELOAD = ["gangmaster.am.barrier.task_context", "gangmaster.protocol.proto.barrier_pb2_grpc", "grpc"]


def auto_rounds(n: int) -> int:
    """Enough rounds for a p99 where rounds are cheap, few where one takes a second."""
    return 400 if n <= 8 else 100 if n <= 64 else 30 if n <= 1024 else 10


@dataclass
class Figures:
    tasks: int
    design: str
    processes: int
    rounds: int
    round_median_ms: float
    round_p99_ms: float
    skew_median_ms: float
    skew_p99_ms: float
    retries: int
    unfinished_tasks: int
    ping_median_ms: float
    ping_floor_ms: float | None = None  # N bare unary calls at the server's N-process throughput
    stream_floor_ms: float | None = None  # the same, N messages on N streams (Session's transport)
    server_cpu_us: float | None = None  # coordinator process CPU per arrival, warm-up included
    messages_per_round: float | None = None  # calls the coordinator received per round
    task_cpu_us: float | None = None  # the task processes' CPU per arrival (from their fork)
    floor_ms: float | None = None  # the tree's shape over bare Unix sockets, median round
    #: CPU per measured round (ms) by kind of process: the coordinator's (this one), the
    #: processes of tasks that lead their host, of the other tasks, of coroutine followers
    cpu_per_round_ms: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.round_median_ms / self.ping_median_ms


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# ------------------------------------------------------------------ task processes
def _one_task(env: dict[str, str], total_rounds: int, warmup: int, results) -> None:
    from gangmaster.am.barrier.task_context import BarrierTaskContext

    ctx = BarrierTaskContext.from_env(env)
    times = []
    window = _Window(warmup, total_rounds, results if ctx.task_index() == 0 else None)
    for r in range(total_rounds):
        ctx.barrier()
        times.append(time.monotonic_ns())
        window.round_done(r)
    kind = "leaders" if ctx._leader is not None else "tasks"
    ctx.close()
    results.put((ctx.task_index(), times, ctx.retries, time.process_time(), window.cpu_s, kind))


class _Window:
    """This process's CPU over the measured rounds (after ``warmup``, up to the last); the
    process of task 0 also marks their start and end on ``results``, where the bench's own
    process (the coordinator's) reads its CPU at the same moments."""

    def __init__(self, warmup: int, total: int, marks=None):
        self.first, self.last, self.marks = max(0, warmup - 1), total - 1, marks
        self.start = self.cpu_s = 0.0

    def round_done(self, r: int) -> None:
        if r == self.first:
            self.start = time.process_time()
        elif r == self.last:
            self.cpu_s = time.process_time() - self.start
        else:
            return
        if self.marks is not None:
            self.marks.put(("mark", r))


def _released(reply) -> bool:
    """Whether a SyncReply releases the epoch (False: pending, re-send); an error raises."""
    kind = reply.WhichOneof("outcome")
    if kind == "error":
        raise RuntimeError(f"{reply.error.code}: {reply.error.message}")
    return kind == "released"


def _report(done: list, results, window: "_Window", kind: str) -> None:
    """Put each task's figures, with its share of this process's CPU (all of it, and the
    measured rounds')."""
    share = 1 / max(1, len(done))
    cpu = time.process_time() * share
    for out in done:
        results.put((*out, cpu, window.cpu_s * share, kind))


def _host_followers(envs: list[dict[str, str]], total_rounds: int, warmup: int, results) -> None:
    """The tasks of one host but its leader (the first, its own process), as coroutines of
    one process speaking the local protocol of :class:`~gangmaster.am.barrier.local.LocalSession`
    (as the flat design's many tasks are coroutines speaking gRPC)."""
    asyncio.run(_host_followers_async(envs, total_rounds, warmup, results))


async def _host_followers_async(envs: list[dict[str, str]], total_rounds: int, warmup: int, results) -> None:
    from gangmaster.am.barrier import local as bl
    from gangmaster.am.barrier import task_context as c
    from gangmaster.protocol.proto import barrier_pb2 as pb

    async def task(env: dict[str, str]) -> None:
        caller = pb.Caller(job=env[c.ENV_JOB], gang=env[c.ENV_GANG], attempt=int(env[c.ENV_ATTEMPT]),
                           token=env[c.ENV_TOKEN], task=int(env[c.ENV_TASK_INDEX]))
        name = bl.rendezvous_name(caller.token, caller.job, caller.gang, caller.attempt, env[bl.ENV_LOCAL_GROUP])
        while True:   # the leader binds the name at its first barrier()
            try:
                reader, writer = await asyncio.open_unix_connection(name)
                break
            except (ConnectionRefusedError, FileNotFoundError):
                await asyncio.sleep(0.01)

        async def frame() -> bytes:
            (size,) = bl._FRAME.unpack(await reader.readexactly(bl._FRAME.size))
            return await reader.readexactly(size)

        writer.write(bl._frame(caller))
        await frame()   # the leader's hello
        times = []
        for epoch in range(total_rounds):
            request = bl._frame(pb.SyncRequest(caller=caller, epoch=epoch, hold_ms=60_000))
            while True:
                writer.write(request)
                if _released(pb.SyncReply.FromString(await frame())):
                    break
            times.append(time.monotonic_ns())
            if caller.task == first:
                window.round_done(epoch)
        writer.close()
        done.append((caller.task, times, 0))

    done: list = []
    window = _Window(warmup, total_rounds)
    first = int(envs[0][c.ENV_TASK_INDEX])
    await asyncio.gather(*(task(env) for env in envs))
    _report(done, results, window, "followers")


def _many_tasks(envs: list[dict[str, str]], total_rounds: int, warmup: int, results) -> None:
    asyncio.run(_many_tasks_async(envs, total_rounds, warmup, results))


async def _many_tasks_async(envs: list[dict[str, str]], total_rounds: int, warmup: int, results) -> None:
    import grpc

    from gangmaster.am.barrier import task_context as c
    from gangmaster.protocol.proto import barrier_pb2 as pb
    from gangmaster.protocol.proto import barrier_pb2_grpc as pb_grpc

    address = envs[0][c.ENV_ADDRESS]
    async with grpc.aio.insecure_channel(address, options=[("grpc.enable_retries", 0)]) as channel:
        stub = pb_grpc.BarrierCoordinatorStub(channel)

        async def task(env: dict[str, str]) -> None:
            caller = pb.Caller(job=env[c.ENV_JOB], gang=env[c.ENV_GANG], attempt=int(env[c.ENV_ATTEMPT]),
                               token=env[c.ENV_TOKEN], task=int(env[c.ENV_TASK_INDEX]))
            times, retries = [], 0
            session = None  # one Session stream per task, as BarrierTaskContext keeps
            for epoch in range(total_rounds):
                request = pb.SyncRequest(caller=caller, epoch=epoch, hold_ms=60_000)
                while True:
                    try:
                        session = session or stub.Session()
                        await session.write(request)
                        reply = await session.read()
                        if reply is grpc.aio.EOF:
                            raise RuntimeError("the coordinator ended the session stream")
                    except grpc.aio.AioRpcError as exc:
                        if exc.code() not in c.RETRIED_CODES:
                            raise
                        retries += 1
                        session.cancel()
                        session = None
                        await asyncio.sleep(0.01)
                        continue
                    if _released(reply):
                        break
                times.append(time.monotonic_ns())
                if caller.task == first:
                    window.round_done(epoch)
            await session.done_writing()
            done.append((caller.task, times, retries))

        done: list = []
        first = int(envs[0][c.ENV_TASK_INDEX])
        window = _Window(warmup, total_rounds, results if first == 0 else None)
        await asyncio.gather(*(task(env) for env in envs))
        _report(done, results, window, "tasks")


def _ping_load(address: str, calls: int, stream: bool, go, results) -> None:
    """Warm up, wait for the start signal, then ``calls`` bare round trips as fast as
    possible: unary ``Ping`` calls, or (``stream``) messages on one ``PingSession``
    stream, driven as :class:`BarrierTaskContext` drives its Session stream."""
    import grpc

    from gangmaster.protocol.proto import barrier_pb2 as pb
    from gangmaster.protocol.proto import barrier_pb2_grpc as pb_grpc

    with grpc.insecure_channel(address, options=[("grpc.enable_retries", 0)]) as channel:
        stub = pb_grpc.BarrierCoordinatorStub(channel)
        request = pb.PingRequest()
        if stream:  # the same single-threaded stream driver as BarrierTaskContext's
            from gangmaster.am.barrier.task_context import _DirectSession

            session = _DirectSession(channel, "/gangmaster.barrier.BarrierCoordinator/PingSession",
                                     pb.PingReply)

            def ping() -> None:
                session.exchange(request)
        else:
            def ping() -> None:
                stub.Ping(request, timeout=30)
        for _ in range(10):
            ping()
        results.put(None)
        go.wait(120)
        start = time.monotonic_ns()
        for _ in range(calls):
            ping()
        results.put((start, time.monotonic_ns()))
        if stream:
            session.cancel()


def _ping(address: str, calls: int, results) -> None:
    import grpc

    from gangmaster.protocol.proto import barrier_pb2 as pb
    from gangmaster.protocol.proto import barrier_pb2_grpc as pb_grpc

    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.BarrierCoordinatorStub(channel)
        for _ in range(50):
            stub.Ping(pb.PingRequest(), timeout=10)
        took = []
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            stub.Ping(pb.PingRequest(), timeout=10)
            took.append((time.perf_counter_ns() - t0) / 1e6)
    results.put(took)


# ------------------------------------------------------------------ the run
def measure_ping_load(ctx, address: str, processes: int, calls: int, stream: bool = False) -> float:
    """Bare round trips per second the server answers with ``processes`` processes each
    calling back to back (unary calls, or messages on a stream each): the most any
    coordinator on that gRPC transport could do with that many task processes on this
    machine (ms per N calls = N / this)."""
    go, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_ping_load, args=(address, calls, stream, go, results))
             for _ in range(processes)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            results.get(timeout=120)
        go.set()
        spans = [results.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(10)
    return processes * calls / ((max(e for _, e in spans) - min(s for s, _ in spans)) / 1e9)


def measure_ping(ctx, address: str, calls: int) -> list[float]:
    results = ctx.Queue()
    p = ctx.Process(target=_ping, args=(address, calls, results))
    p.start()
    took = results.get(timeout=120)
    p.join(30)
    return took


def _run_tasks(procs: list, results, n: int, total: int) -> tuple[dict[int, list[int]], int, float, dict[str, float]]:
    """Start ``procs`` and collect what their ``n`` tasks report (each task's release
    times, retries, CPU; from the bench's task processes also their CPU in the measured
    rounds, by kind); every process is joined (or killed) before this returns. The
    returned CPU by kind has ``coordinator``: this process's over the same rounds, read
    when task 0's process marks them."""
    task_cpu_s = 0.0
    window: dict[str, float] = {}
    marks: list[float] = []
    for p in procs:
        p.start()
    per_task: dict[int, list[int]] = {}
    retries = 0
    deadline = time.monotonic() + 60 + total * max(2.0, n / 500)
    try:
        while len(per_task) < n and time.monotonic() < deadline:
            try:
                item = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except Exception:
                break
            if item[0] == "mark":
                marks.append(time.process_time())
                continue
            index, times, r, cpu, *measured = item
            task_cpu_s += cpu
            if measured:
                window[measured[1]] = window.get(measured[1], 0.0) + measured[0]
            per_task[index], retries = times, retries + r
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    if len(marks) == 2:
        window["coordinator"] = marks[1] - marks[0]
    return per_task, retries, task_cpu_s, window


def _rounds(per_task: dict[int, list[int]], total: int, warmup: int) -> tuple[list[float], list[float]]:
    """Each measured round (last release to last release, ms) and its release skew."""
    complete = [t for t in per_task.values() if len(t) == total]
    last = [max(t[r] for t in complete) for r in range(total)]
    first = [min(t[r] for t in complete) for r in range(total)]
    rounds_ms = [(last[r] - last[r - 1]) / 1e6 for r in range(warmup, total)]
    skews_ms = [(last[r] - first[r]) / 1e6 for r in range(warmup, total)]
    return rounds_ms, skews_ms


def measure_floor(ctx, n: int, rounds: int, warmup: int, tasks_per_host: int, process_per_task: bool) -> float:
    """Median round of the tree's shape over bare Unix sockets (:mod:`.barrier_floor`), ms."""
    total = warmup + rounds
    results = ctx.Queue()
    procs = barrier_floor.processes(ctx, n, tasks_per_host, total, process_per_task, results)
    per_task, _retries, _cpu, _window = _run_tasks(procs, results, n, total)
    if len(per_task) < n:
        raise RuntimeError(f"bench barrier --tasks {n}: the floor's tasks did not all finish")
    return statistics.median(_rounds(per_task, total, warmup)[0])


def measure_barrier(ctx, server: "CompletionQueueBarrierServer | BarrierServer", n: int, rounds: int,
                    warmup: int, max_process_tasks: int, tasks_per_process: int, ping_ms: float,
                    design: str = "tree", tasks_per_host: int = 8) -> Figures:
    from gangmaster.am.barrier.local import ENV_LOCAL_GROUP, ENV_TREE

    job, gang = "bench", f"n{n}-{design}"
    hosts = [f"host{i // tasks_per_host}" if design == "tree" else "127.0.0.1" for i in range(n)]
    server.open_attempt(job, gang, 1, [TaskInfo(i, hosts[i]) for i in range(n)])
    envs = [server.task_env(job, gang, 1, i) for i in range(n)]
    for env, host in zip(envs, hosts):
        if design == "tree":
            env[ENV_LOCAL_GROUP] = host
        else:
            env[ENV_TREE] = "0"
    total = warmup + rounds
    results = ctx.Queue()
    if n <= max_process_tasks:
        procs = [ctx.Process(target=_one_task, args=(env, total, warmup, results)) for env in envs]
    elif design == "tree":   # per host: its leader's process, and its other tasks' one
        groups = [envs[i:i + tasks_per_host] for i in range(0, n, tasks_per_host)]
        procs = [ctx.Process(target=_one_task, args=(g[0], total, warmup, results)) for g in groups]
        procs += [ctx.Process(target=_host_followers, args=(g[1:], total, warmup, results))
                  for g in groups if g[1:]]
    else:
        groups = [envs[i:i + tasks_per_process] for i in range(0, n, tasks_per_process)]
        procs = [ctx.Process(target=_many_tasks, args=(g, total, warmup, results)) for g in groups]
    before = server.statistics()
    arrivals_before, cpu_before = before.arrivals, time.process_time()
    try:
        per_task, retries, task_cpu_s, window = _run_tasks(procs, results, n, total)
    finally:
        server.close_attempt(job, gang, 1)
    cpu_s = time.process_time() - cpu_before
    after = server.statistics()
    arrivals = max(1, after.arrivals - arrivals_before)
    unfinished = n - sum(1 for t in per_task.values() if len(t) == total)
    if len(per_task) < 1:
        raise RuntimeError(f"bench barrier --tasks {n}: no task finished")
    rounds_ms, skews_ms = _rounds(per_task, total, warmup)
    return Figures(n, design, len(procs), rounds, statistics.median(rounds_ms), percentile(rounds_ms, 99),
                   statistics.median(skews_ms), percentile(skews_ms, 99), retries, unfinished, ping_ms,
                   server_cpu_us=cpu_s / arrivals * 1e6,
                   messages_per_round=(after.calls - before.calls) / total,
                   task_cpu_us=task_cpu_s / arrivals * 1e6,
                   cpu_per_round_ms={kind: cpu * 1e3 / rounds for kind, cpu in sorted(window.items())})


def _start_as_launched(server) -> None:
    """Give this process's children (the task processes, forked from a server started
    after this) what a launch gives a task's process before it loads gRPC: the attempt
    environment's variables that gRPC reads once, at start. (This process, the
    coordinator's, has loaded it already, as the AM has.)"""
    env = server.attempt_env("bench", "start", 1, "-", 1)
    os.environ.update({name: value for name, value in env.items() if name.startswith("GRPC_")})


def run(args: argparse.Namespace) -> int:
    logging.getLogger("gangmaster.barrier").setLevel(logging.WARNING)
    tasks = args.tasks
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    server = SERVERS[args.server](BarrierConfig(log_interval_s=60.0))
    server.start()
    _start_as_launched(server)
    figures = []
    try:
        ping = measure_ping(ctx, server.address, args.ping_calls)
        ping_ms = statistics.median(ping)
        print(f"bare gRPC unary round trip (Ping, 1 process, {len(ping)} calls): "
              f"median {ping_ms:.3f} ms, p99 {percentile(ping, 99):.3f} ms", flush=True)
        print(f"{'tasks':>6} {'design':>6} {'procs':>5} {'rounds':>6} {'median ms':>10} {'p99 ms':>9} "
              f"{'skew med':>9} {'skew p99':>9} {'x ping':>7} {'N pings':>8} {'N spings':>8} "
              f"{'srv us':>6} {'task us':>7} {'msgs':>6} {'drops':>6} {'floor ms':>8} {'x floor':>7}  target", flush=True)
        designs = DESIGNS if args.design == "both" else (args.design,)
        for n, design in ((n, d) for n in tasks for d in designs):
            rounds = args.rounds or auto_rounds(n)
            f = measure_barrier(ctx, server, n, rounds, args.warmup, args.max_process_tasks,
                                args.tasks_per_process, ping_ms, design, args.tasks_per_host)
            if n <= args.max_process_tasks and args.ping_load_calls and design == designs[-1]:
                rate = measure_ping_load(ctx, server.address, n, args.ping_load_calls)
                f.ping_floor_ms = n / rate * 1e3
                rate = measure_ping_load(ctx, server.address, n, args.ping_load_calls, stream=True)
                f.stream_floor_ms = n / rate * 1e3
            if design == "tree" and args.floor:
                f.floor_ms = measure_floor(ctx, n, rounds, args.warmup, args.tasks_per_host,
                                           n <= args.max_process_tasks)
            figures.append(f)
            target = TARGETS_MS.get(n)
            verdict = ""
            if target is not None:
                ok = f.round_median_ms <= target and f.retries == 0 and f.unfinished_tasks == 0
                verdict = f"<= {target:g} ms, no drops: {'met' if ok else 'MISSED'}"
            floor = "-" if f.ping_floor_ms is None else f"{f.ping_floor_ms:.3f}"
            sfloor = "-" if f.stream_floor_ms is None else f"{f.stream_floor_ms:.3f}"
            local = ("-", "-") if f.floor_ms is None else (f"{f.floor_ms:.3f}", f"{f.round_median_ms / f.floor_ms:.1f}")
            print(f"{n:>6} {design:>6} {f.processes:>5} {f.rounds:>6} {f.round_median_ms:>10.3f} "
                  f"{f.round_p99_ms:>9.3f} {f.skew_median_ms:>9.3f} {f.skew_p99_ms:>9.3f} "
                  f"{f.ratio:>7.1f} {floor:>8} {sfloor:>8} {f.server_cpu_us:>6.0f} "
                  f"{f.task_cpu_us:>7.0f} {f.messages_per_round:>6.1f} {f.retries + f.unfinished_tasks:>6} {local[0]:>8} {local[1]:>7}  {verdict}", flush=True)
            cpu = f.cpu_per_round_ms
            print(f"{'':>6} CPU per round: {sum(cpu.values()):.1f} ms = "
                  + ", ".join(f"{kind} {ms:.1f}" for kind, ms in cpu.items()), flush=True)
    finally:
        stats = server.statistics()
        server.stop(grace=0)
    print(f"coordinator: {stats.releases} releases, {stats.arrivals} arrivals, "
          f"{stats.duplicate_arrivals} re-sent, {stats.stale_requests} stale, "
          f"{stats.auth_refusals} refused", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"ping_median_ms": ping_ms, "cpus": os.cpu_count(),
                       "results": [asdict(f) for f in figures]}, fh, indent=2)
    return 0 if all(f.unfinished_tasks == 0 for f in figures) else 1


def add_parser(sub):
    parser = add_bench_parser(sub, "barrier", "barrier() round time, release skew, vs a bare gRPC round trip",
                              __doc__)
    parser.add_argument("--tasks", type=counts, default=",".join(map(str, DEFAULT_TASKS)),
                        help="comma-separated gang sizes to measure (default: %(default)s)")
    parser.add_argument("--rounds", type=count(0), default=0,
                        help="measured rounds per size (default: 400 up to 8 tasks, 100 up to 64, "
                             "30 up to 1024, 10 beyond)")
    parser.add_argument("--warmup", type=count(0), default=5,
                        help="unmeasured rounds first (processes starting, connecting); default 5")
    parser.add_argument("--max-process-tasks", type=count(), default=64,
                        help="up to this many tasks, each task is its own process (default 64)")
    parser.add_argument("--tasks-per-process", type=count(), default=512,
                        help="above that, tasks per process, as coroutines (default 512)")
    parser.add_argument("--design", choices=(*DESIGNS, "both"), default="tree",
                        help="tree: the tasks of a host meet at a leader that calls the coordinator for "
                             "them; flat: every task calls it; both: each size both ways (default tree)")
    parser.add_argument("--tasks-per-host", type=count(), default=8,
                        help="tree: tasks on each host (default 8)")
    parser.add_argument("--ping-calls", type=count(), default=2000,
                        help="bare round trips for the baseline (default 2000)")
    parser.add_argument("--ping-load-calls", type=count(0), default=200,
                        help="for sizes with a process per task: bare round trips per process, "
                             "all processes at once, giving the 'N pings' (unary calls) and "
                             "'N spings' (stream messages) columns: N round trips at the "
                             "server's throughput (0: skip; default 200)")
    parser.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                        help="tree: also measure the same shape over bare Unix sockets (a relay "
                             "process per host, a hub for the coordinator, the same task processes), "
                             "the 'floor ms' column, and the round as a multiple of it "
                             "('x floor'; default on)")
    parser.add_argument("--server", choices=tuple(SERVERS), default="cq",
                        help="the coordinator's gRPC server: cq (one thread on gRPC's completion queue, "
                             "the AM's) or aio (grpc.aio's BarrierServer); default cq")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.set_defaults(func=run)
    return parser
