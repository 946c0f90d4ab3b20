"""The AM's Prometheus metrics, in a registry of its own (several AMs can live in
one process, as in a simulation), served over HTTP on request.

Names follow Prometheus conventions (https://prometheus.io/docs/practices/naming/):
base units (``_seconds``; GPUs in GPUs, a share as a fraction of one), the unit last
and plural, ``_total`` on counters (the client library adds it), ``_info`` with value 1
for the build's versions as labels, and no job or application ids as labels
when an endpoint serves one job (the scrape target already says which). A driver
running several jobs serves them all on one :class:`MetricsEndpoint`, each sample
labelled ``job_name`` and ``app_id``. Beside ``/metrics`` it serves ``/why``: each
job's waiting gangs and their diagnoses as JSON (``gangmaster why``), and ``/``: the
status page (:mod:`.status_page`).
"""
from __future__ import annotations

import bisect
import functools
import json
import operator
import threading
import time
from array import array
from collections import Counter
from functools import partial, reduce
from socketserver import ThreadingMixIn
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import prometheus_client.metrics
from prometheus_client import CollectorRegistry, Gauge, make_wsgi_app
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from .status_page import render_page

#: Where the endpoint listens unless told (``--metrics-host``): this machine only. It has
#: no authentication, and /why names jobs, roles and hosts: 0.0.0.0 shows them to anyone
#: who can reach the port.
DEFAULT_METRICS_HOST = "127.0.0.1"
CONTAINER_STATES = ("requested", "allocated", "running", "succeeded", "failed", "stopped")
_WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)
_SELECT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class AMMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = r = registry or CollectorRegistry()
        self.pending_gangs = Gauge("gangmaster_pending_gangs",
                                   "Gangs waiting for, or acquiring, their containers", registry=r)
        self.gang_wait = PlainHistogram("gangmaster_gang_wait_seconds",
                                        "Time from a gang attempt starting to wait until all its tasks started",
                                        buckets=_WAIT_BUCKETS, registry=r)
        self.attempts = PlainCounter("gangmaster_gang_attempts", "Gang attempts begun (first runs and restarts)",
                                     registry=r)
        self.restarts = PlainCounter("gangmaster_gang_restarts", "Gang attempts ended by a failure and retried",
                                     registry=r)
        self.releases = PlainCounter("gangmaster_gang_releases",
                                     "Partial holds given back because the rest of the gang did not come",
                                     registry=r)
        self.reselections = PlainCounter("gangmaster_reselections",
                                         "Instances selected again after the RM would not grant their node",
                                         registry=r)
        self.selection_latency = PlainHistogram("gangmaster_selection_latency_seconds",
                                                "Wall time of one placement decision for the instances of a gang",
                                                buckets=_SELECT_BUCKETS, registry=r)
        self.containers = Gauge("gangmaster_containers", "The AM's containers by state", ["state"], registry=r)
        self.gang_shortfall = Gauge("gangmaster_gang_shortfall",
                                    "Instances of the role a waiting gang cannot place now (its last diagnosis)",
                                    ["role"], registry=r)
        self.diagnoses = PlainCounter("gangmaster_gang_diagnoses",
                                      "Diagnoses of waiting gangs made (once per change of what they wait for)",
                                      registry=r)
        self.gang_blocked_nodes = Gauge("gangmaster_gang_blocked_nodes",
                                        "Nodes that turn the role of a waiting gang down, by reason code "
                                        "(its last diagnosis)", ["role", "reason"], registry=r)
        self.gpus_allocated = Gauge("gangmaster_allocated_gpus",
                                    "GPUs the job's containers hold now (granted or running): whole GPUs plus "
                                    "shares of GPUs, as fractions (a 300m share: 0.3)", registry=r)
        self.shared_gpus_allocated = Gauge("gangmaster_allocated_shared_gpus",
                                           "The part of gangmaster_allocated_gpus held as shares of GPUs "
                                           "(fractions of one GPU each)", registry=r)
        self.barrier_waiting = Gauge("gangmaster_barrier_waiting_tasks",
                                     "Tasks of the job whose barrier()/all_gather() call its barrier coordinator "
                                     "holds now, waiting for the rest of their gang", registry=r)
        #: what the job holds now, read at each scrape (:meth:`watch`); nothing until watched
        self.gauges: Callable[[], GaugeValues] = _nothing_held
        self.barrier_waiting.set_function(lambda: self.barrier_waiting_tasks())
        #: the job's tasks waiting at its barrier coordinator, read at each scrape (:meth:`watch_barrier`)
        self.barrier_waiting_tasks: Callable[[], int] = int
        # The gauges of what the job holds are read when scraped, not set as its gangs move:
        # worked out only when someone reads them (a driver that never serves the metrics
        # never does; set as the gangs move, they would be set 14 times a job).
        self.pending_gangs.set_function(lambda: self.gauges().pending_gangs)
        for state in CONTAINER_STATES:
            self.containers.labels(state).set_function(lambda state=state: self.gauges().containers.get(state, 0))
        self.gpus_allocated.set_function(lambda: (held := self.gauges()).gpus + held.gpu_milli / 1000)
        self.shared_gpus_allocated.set_function(lambda: self.gauges().gpu_milli / 1000)

    def watch(self, gauges: Callable[[], "GaugeValues"]) -> None:
        """Read the job's gauges (pending gangs, containers by state, GPUs held) from
        ``gauges()`` at each scrape: the driver that serves the metrics watches the AM that
        serves the job now (its ``gauge_values``; a new AM attempt takes the metrics over)."""
        self.gauges = gauges

    def watch_barrier(self, waiting_tasks: Callable[[], int]) -> None:
        """Read the job's tasks waiting at its barrier coordinator from ``waiting_tasks()`` at
        each scrape (:meth:`~gangmaster.am.barrier.coordinator.BarrierCoordinator.waiting_tasks`
        of the job's application id; tests wait on it rather than sleeping)."""
        self.barrier_waiting_tasks = waiting_tasks


class PlainCounter:
    """A Prometheus counter the AM counts with a plain ``+=``, served exactly as a
    ``prometheus_client.Counter`` of the same name (``<name>_total`` and ``<name>_created``).

    The client library's counter takes a lock at every ``inc``, for writers in many
    threads; an AM's counters have one writer (the AM's own thread) and readers at a
    scrape, which read a number, whole. A trace replay counts tens of thousands of gangs."""

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry):
        self.name, self.documentation = name, documentation
        self.value = 0.0
        self.created = time.time()
        registry.register(self)

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, "counter")]

    def collect(self) -> list[Metric]:
        metric = Metric(self.name, self.documentation, "counter")
        metric.add_sample(self.name + "_total", {}, self.value)
        if _created_series():
            metric.add_sample(self.name + "_created", {}, self.created)
        return [metric]


class PlainHistogram:
    """A Prometheus histogram the AM observes into (one writer, as :class:`PlainCounter`),
    served exactly as a ``prometheus_client.Histogram`` of the same name and buckets: an
    observation counts in the first bucket whose bound is at least it.

    ``observe(amount)`` only keeps the amount, as a double in an array (8 bytes each, no
    Python frame: an AM observes twice for every gang it starts); the amounts kept are
    counted into the buckets and added to the sum, in the order they came, when the histogram
    is collected (a scrape) or read (:meth:`totals`): all at once, each bucket's count in one
    step. What waits for a scrape is 8 bytes an observation: an AM that is never scraped and
    places a gang every second keeps 0.7 MB a day of them."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...], registry: CollectorRegistry):
        self.name, self.documentation = name, documentation
        self.bounds = [float(b) for b in buckets] + [float("inf")]
        self.counts = [0] * len(self.bounds)   # per bucket, not cumulative (of the amounts counted in)
        self.sum = 0.0
        self._observed = array("d")   # the amounts observed and not counted in yet, as they came
        self.observe: Callable[[float], None] = self._observed.append
        self._counting = threading.Lock()   # (two scrapes at once count each amount once)
        self.created = time.time()
        registry.register(self)

    def totals(self) -> tuple[list[int], float]:
        """The counts per bucket (not cumulative) and the sum, of every amount observed so far."""
        with self._counting:
            observed = self._observed
            amounts = observed[:len(observed)]   # (the AM may observe meanwhile: its amounts go after these)
            del observed[:len(amounts)]
            self.sum = reduce(operator.add, amounts, self.sum)   # added one by one, in the order they came
            counts = self.counts
            for bucket, n in Counter(map(partial(bisect.bisect_left, self.bounds), amounts)).items():
                counts[bucket] += n
            return list(counts), self.sum

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, "histogram")]

    def collect(self) -> list[Metric]:
        metric = Metric(self.name, self.documentation, "histogram")
        counts, total = self.totals()
        cumulative = 0.0
        for bound, count in zip(self.bounds, counts):
            cumulative += count
            metric.add_sample(self.name + "_bucket", {"le": floatToGoString(bound)}, cumulative)
        metric.add_sample(self.name + "_count", {}, cumulative)
        metric.add_sample(self.name + "_sum", {}, total)
        if _created_series():
            metric.add_sample(self.name + "_created", {}, self.created)
        return [metric]


def _created_series() -> bool:
    """Whether metrics carry ``_created`` samples: as the client library's own metrics
    (``PROMETHEUS_DISABLE_CREATED_SERIES``, ``prometheus_client.disable_created_metrics``)."""
    return getattr(prometheus_client.metrics, "_use_created", True)


@dataclass(frozen=True)
class GaugeValues:
    """What the AM holds now, as its gauges show it."""

    pending_gangs: int
    containers: Mapping[str, int]   # by state (CONTAINER_STATES)
    gpus: int                       # whole GPUs held (granted or running)
    gpu_milli: int                  # milli-GPU held as shares of GPUs


_NOTHING_HELD = GaugeValues(0, {}, 0, 0)


def _nothing_held() -> GaugeValues:
    """The gauges of metrics nobody watches: nothing held."""
    return _NOTHING_HELD


class MetricsEndpoint:
    """``/metrics`` over HTTP for every job of a driver: one job's metrics as they are;
    several jobs' merged, each sample labelled with its ``job_name`` and ``app_id``;
    ``/why``: ``{"jobs": [...]}``, what each job's ``why`` callable says (the AM's
    :meth:`~gangmaster.am.core.master.ApplicationMaster.why_report`); and ``/``, the status
    page: that, with each job's ``attempts`` (``AttemptRecord.to_dict`` of the AM's
    :meth:`~gangmaster.am.core.master.ApplicationMaster.history`).

    ::

        endpoint = MetricsEndpoint()
        port = endpoint.serve(0)                      # 0: any free port
        endpoint.add(run.metrics, why=lambda: run.am.why_report(),
                     attempts=lambda: [a.to_dict() for a in run.am.history()], job_name="train", app_id="app_0001")
    """

    def __init__(self) -> None:
        self._jobs: list[tuple[AMMetrics, dict[str, str]]] = []
        self._why: list[tuple[Callable[[], dict], Callable[[], list[dict]] | None]] = []
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self.server = None
        self.url = ""

    def add(self, metrics: AMMetrics, why: Callable[[], dict] | None = None,
            attempts: Callable[[], list[dict]] | None = None, **labels: str) -> None:
        self._jobs.append((metrics, labels))
        if why is not None:
            self._why.append((why, attempts))

    def why(self) -> dict:
        """What ``/why`` answers."""
        return {"jobs": [report() for report, _ in self._why]}

    def status(self) -> list[dict]:
        """What the status page shows: each job's ``/why`` entry with its ``attempts``."""
        return [{**report(), "attempts": attempts() if attempts is not None else []} for report, attempts in self._why]

    def collect(self) -> Iterator[Metric]:
        """The registry calls this at every scrape."""
        yield build_info()
        if len(self._jobs) == 1:
            yield from self._jobs[0][0].registry.collect()
            return
        merged: dict[str, Metric] = {}
        for metrics, labels in self._jobs:
            for family in metrics.registry.collect():
                into = merged.get(family.name)
                if into is None:
                    into = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
                for sample in family.samples:
                    into.add_sample(sample.name, {**sample.labels, **labels}, sample.value, sample.timestamp,
                                    sample.exemplar)
        yield from merged.values()

    def serve(self, port: int = 0, addr: str = DEFAULT_METRICS_HOST) -> int:
        """Serve on ``addr:port`` (0: a free port), in a thread of its own; returns the port
        (the metrics' address is :attr:`url`, the diagnoses' :attr:`why_url`)."""
        metrics_app = make_wsgi_app(self.registry)

        def app(environ, start_response):
            path = environ.get("PATH_INFO")
            if path == "/metrics":
                return metrics_app(environ, start_response)
            if path not in PATHS:   # a typo (`/whY`) must not pass for an answer
                return _answer(start_response, "404 Not Found", {"error": f"no such path: {path}; this endpoint "
                                                                  f"serves {', '.join(PATHS[:-1])} and {PATHS[-1]}"})
            try:
                if path == "/":
                    return _page(start_response, render_page(self.status()))
                return _answer(start_response, "200 OK", self.why())
            except Exception as exc:   # the AM was changing under the reader: say so, keep serving
                return _answer(start_response, "503 Service Unavailable", {"error": f"{type(exc).__name__}: {exc}"})

        try:
            self.server = make_server(addr, port, app, _ThreadingServer, handler_class=_QuietHandler)
        except OSError as exc:   # a name that does not resolve, an address not this machine's, a port taken
            from gangmaster.conf.fields import ConfigError
            raise ConfigError("--metrics-host/--metrics-port (am.metrics_host/metrics_port)", "",
                              "an address and port this machine can listen on",
                              f"{addr}:{port} ({exc.strerror or exc})") from None
        threading.Thread(target=self.server.serve_forever, name="gangmaster-metrics", daemon=True).start()
        bound = int(self.server.server_port)
        self.url = f"http://{addr}:{bound}/metrics"
        self.why_url = f"http://{addr}:{bound}/why"
        return bound

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def build_info() -> Metric:
    """``gangmaster_build_info``: value 1, the versions of gangmaster, Python, grpcio and
    protobuf as labels (Prometheus's ``_info`` convention: join on it to tell builds apart)."""
    metric = Metric("gangmaster_build", "The running gangmaster's version and those of what it runs on", "info")
    metric.add_sample("gangmaster_build_info", _versions(), 1.0)
    return metric


@functools.cache
def _versions() -> dict[str, str]:
    """Looked up once: reading the installed metadata takes milliseconds a package."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:   # run from a checkout that was never installed
            return "unknown"

    return {"version": installed("gangmaster"), "python": platform.python_version(),
            "grpcio": installed("grpcio"), "protobuf": installed("protobuf")}


#: Connections the endpoint's socket queues before it accepts them (Linux caps it at
#: net.core.somaxconn, 4096 on current kernels): a burst of 500 scrapes at once is answered.
METRICS_LISTEN_BACKLOG = 1024
#: What the endpoint serves; any other path is answered 404.
PATHS = ("/", "/metrics", "/why")


def _answer(start_response, status: str, document: dict) -> list[bytes]:
    body = json.dumps(document).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def _page(start_response, html: str) -> list[bytes]:
    body = html.encode()
    start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body))),
                              ("Cache-Control", "no-store")])
    return [body]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    """One thread a request, and a listen backlog a burst of scrapes fits in (socketserver's
    default, 5, dropped half of 500 connections made at once: a Prometheus fleet, a
    dashboard's refresh)."""

    daemon_threads = True
    request_queue_size = METRICS_LISTEN_BACKLOG


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):   # a scrape is not news
        pass
