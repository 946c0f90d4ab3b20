"""The AM's Prometheus metrics, in a registry of its own (several AMs can live in
one process, as in a simulation), served over HTTP on request.

Names follow Prometheus conventions: base units (``_seconds``), ``_total`` on
counters (the client library adds it), and no job or application ids as labels
when an endpoint serves one job (the scrape target already says which). A driver
running several jobs serves them all on one :class:`MetricsEndpoint`, each sample
labelled ``job_name`` and ``app_id``.
"""
from __future__ import annotations

from typing import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.metrics_core import Metric

CONTAINER_STATES = ("requested", "allocated", "running", "succeeded", "failed", "stopped")
_WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)
_SELECT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class AMMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = r = registry or CollectorRegistry()
        self.pending_gangs = Gauge("gangmaster_pending_gangs",
                                   "Gangs waiting for, or acquiring, their containers", registry=r)
        self.gang_wait = Histogram("gangmaster_gang_wait_seconds",
                                   "Time from a gang attempt starting to wait until all its tasks started",
                                   buckets=_WAIT_BUCKETS, registry=r)
        self.attempts = Counter("gangmaster_gang_attempts", "Gang attempts begun (first runs and restarts)",
                                registry=r)
        self.restarts = Counter("gangmaster_gang_restarts", "Gang attempts ended by a failure and retried",
                                registry=r)
        self.releases = Counter("gangmaster_gang_releases",
                                "Partial holds given back because the rest of the gang did not come",
                                registry=r)
        self.reselections = Counter("gangmaster_reselections",
                                    "Instances selected again after the RM would not grant their node",
                                    registry=r)
        self.selection_latency = Histogram("gangmaster_selection_latency_seconds",
                                           "Wall time of one placement decision for the instances of a gang",
                                           buckets=_SELECT_BUCKETS, registry=r)
        self.containers = Gauge("gangmaster_containers", "The AM's containers by state", ["state"], registry=r)
        self.gang_shortfall = Gauge("gangmaster_gang_shortfall",
                                    "Instances of the role a waiting gang cannot place now (its last diagnosis)",
                                    ["role"], registry=r)
        self.gang_blocked_nodes = Gauge("gangmaster_gang_blocked_nodes",
                                        "Nodes that turn the role of a waiting gang down, by reason code "
                                        "(its last diagnosis)", ["role", "reason"], registry=r)
        for state in CONTAINER_STATES:
            self.containers.labels(state).set(0)


class MetricsEndpoint:
    """``/metrics`` over HTTP for every job of a driver: one job's metrics as they are;
    several jobs' merged, each sample labelled with its ``job_name`` and ``app_id``.

    ::

        endpoint = MetricsEndpoint()
        port = endpoint.serve(0)                      # 0: any free port
        endpoint.add(run.metrics, job_name="train", app_id="app_0001")
    """

    def __init__(self) -> None:
        self._jobs: list[tuple[AMMetrics, dict[str, str]]] = []
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self.server = None
        self.url = ""

    def add(self, metrics: AMMetrics, **labels: str) -> None:
        self._jobs.append((metrics, labels))

    def collect(self) -> Iterator[Metric]:
        """The registry calls this at every scrape."""
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

    def serve(self, port: int = 0, addr: str = "127.0.0.1") -> int:
        """Serve on ``addr:port`` (0: a free port); returns the port (also in :attr:`url`)."""
        self.server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        bound = int(self.server.server_port)
        self.url = f"http://{addr}:{bound}/metrics"
        return bound

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
