"""The replays whose metrics.json figures tests/unit/test_replay_metrics_golden.py holds to
the figures the driver gave before it kept job state in columns
(tests/fixtures/replay_engine/metrics_golden.json): contended and roomy clusters, FIFO,
backfill and drop (not reserve: its planner is another branch's to change), a heartbeat,
isolated queues, gangs, jobs that never fit, a random strategy, preemption, and an openb
fill (its own figures too). ``python
tests/unit/replay_metric_cases.py`` writes the golden file again (only when a change of
the figures is meant)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gangmaster.tools.replay.engine import ReplayOptions, replay  # noqa: E402
from gangmaster.tools.replay.metrics import (fill_curve, fill_figures, measurement_window,  # noqa: E402
                                             selector_metrics, without_timing)
from gangmaster.tools.replay.openb import fill_plan, read_openb_nodes, read_openb_pods  # noqa: E402

from replay_helpers import cluster, job, synthetic, table  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "replay_engine" / "metrics_golden.json"
OPENB = Path(__file__).resolve().parents[1] / "fixtures" / "replay" / "openb"


def _never_fits():
    return table([job("a", 0, 5, 1), job("big", 1, 5, 16), job("b", 1, 3, 8), job("c", 2, 1, 4)])


CASES = {   # name: (table, cluster, options)
    "roomy-fifo": (lambda: synthetic(400), lambda: cluster(40), ReplayOptions()),
    "contended-fifo": (lambda: synthetic(300), lambda: cluster(3), ReplayOptions()),
    "contended-backfill": (lambda: synthetic(300), lambda: cluster(3), ReplayOptions(queue_policy="backfill")),
    "contended-drop": (lambda: synthetic(300), lambda: cluster(3), ReplayOptions(queue_policy="drop")),
    "heartbeat-30s": (lambda: synthetic(200), lambda: cluster(3), ReplayOptions(heartbeat_s=30.0)),
    "isolated-queues": (lambda: synthetic(200), lambda: cluster(4, {"vc-a": ("n000",), "vc-b": ("n001", "n002")}),
                        ReplayOptions(queue_policy="backfill")),
    "never-fits": (_never_fits, lambda: cluster(1), ReplayOptions()),
    "random-strategy": (lambda: synthetic(200), lambda: cluster(2), ReplayOptions(selector="random", seed=5)),
    "preemption": (lambda: synthetic(200), lambda: cluster(3),
                   ReplayOptions(preemption=True, queue_priorities=(("vc-b", 2, 0),))),
}


def figures(name: str) -> dict:
    """One case's metrics.json entry (its timing keys left out)."""
    if name.startswith("openb-"):
        selector = name.removeprefix("openb-")
        where = read_openb_nodes(OPENB / "openb_node_list_gpu_node.csv")
        plan = fill_plan(read_openb_pods(OPENB / "pods_small.csv"), where.capacity_gpus, 3, inflate=1.5)
        result = replay(plan.table, where, ReplayOptions(selector=selector, queue_policy="drop", seed=3))
        curve = fill_curve(plan.table, result, 1000 * where.capacity_gpus)
        return without_timing({"fill": fill_figures(curve, plan.table, result),
                               "metrics": _metrics(result, where)})
    make_table, make_cluster, options = CASES[name]
    trace, where = make_table(), make_cluster()
    return without_timing(_metrics(replay(trace, where, options), where))


def _metrics(result, where) -> dict:
    window = measurement_window([j.submit_s for j in result.jobs])
    return selector_metrics(result, window, where.gpu_node_shape().gpus)


NAMES = sorted(CASES) + ["openb-fgd", "openb-random"]


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps({name: figures(name) for name in NAMES}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
