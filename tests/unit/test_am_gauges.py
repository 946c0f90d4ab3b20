"""The AM's gauges are read from it when scraped (``AMMetrics.watch``: the driver that
serves the metrics watches the AM serving the job), never set as its gangs move: pending
gangs, containers by state and GPUs show what the AM holds at the scrape, the last state
once the job ended, and 0 before any AM is watched."""
from prometheus_client import generate_latest

from gangmaster.am.spec.jobspec import parse_job
from gangmaster.am.ops.metrics import AMMetrics, GaugeValues
from gangmaster.tools.job_runner import SimulatedRuns

from job_texts import one_role_job
from sim_cluster import nodes

STATES = ("requested", "allocated", "running", "succeeded", "failed", "stopped")


def scraped(metrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    values = {}
    for line in text.splitlines():
        if line.startswith("gangmaster_containers{"):
            values[line.split('state="')[1].split('"')[0]] = float(line.split()[-1])
        elif line.startswith(("gangmaster_pending_gangs ", "gangmaster_allocated_gpus ")):
            values[line.split()[0]] = float(line.split()[-1])
    return values


def test_the_gauges_follow_the_job_at_each_scrape(tmp_path):
    runs = SimulatedRuns(nodes(2))
    run = runs.submit(parse_job(one_role_job(instances=4, duration=30)), tmp_path)
    try:
        runs.sim.run_until(10)   # every task runs
        assert scraped(run.metrics) == {"gangmaster_pending_gangs": 0.0, "gangmaster_allocated_gpus": 4.0,
                                        **dict.fromkeys(STATES, 0.0), "running": 4.0}
        assert runs.run() and run.outcome == "succeeded"
        assert scraped(run.metrics) == {"gangmaster_pending_gangs": 0.0, "gangmaster_allocated_gpus": 0.0,
                                        **dict.fromkeys(STATES, 0.0), "succeeded": 4.0}
    finally:
        runs.close()


def test_a_gang_waiting_for_room_is_pending(tmp_path):
    runs = SimulatedRuns(nodes(1))
    runs.submit(parse_job(one_role_job("first", 4, duration=100)),
                tmp_path / "first")
    run = runs.submit(parse_job(one_role_job(instances=4, duration=30)), tmp_path / "second")
    try:
        runs.sim.run_until(5)   # the first job holds every GPU: the second one's gang asks, and waits
        assert scraped(run.metrics) == {"gangmaster_pending_gangs": 1.0, "gangmaster_allocated_gpus": 0.0,
                                        **dict.fromkeys(STATES, 0.0), "requested": 4.0}
        assert runs.run() and run.outcome == "succeeded"
        assert scraped(run.metrics)["succeeded"] == 4.0
    finally:
        runs.close()


class Holder:
    """Stands in for an AM: what the metrics read at a scrape."""

    def __init__(self, running: int):
        self.running = running

    def gauge_values(self) -> GaugeValues:
        return GaugeValues(1, {"running": self.running}, 2 * self.running, 0)


def test_the_metrics_read_what_they_watch_at_each_scrape_and_nothing_before():
    metrics = AMMetrics()
    assert set(scraped(metrics).values()) == {0.0}   # nobody watched yet: nothing held
    holder = Holder(3)
    metrics.watch(holder.gauge_values)
    assert scraped(metrics) == {"gangmaster_pending_gangs": 1.0, "gangmaster_allocated_gpus": 6.0,
                                **dict.fromkeys(STATES, 0.0), "running": 3.0}
    holder.running = 5   # read at the scrape, not when set
    assert scraped(metrics)["running"] == 5.0
    newer = Holder(1)
    metrics.watch(newer.gauge_values)   # a new AM attempt takes the metrics over
    assert scraped(metrics)["running"] == 1.0
