"""The FGD paper's published results (``hkust-adsl/kubernetes-scheduler-simulator``,
``experiments/analysis/expected_results/``), to set beside a ``--workloads`` family run.

``analysis_allo_discrete.csv`` has one row per workload, policy and seed:
``workload, sc_policy, tune, seed, total_gpus, 0, 1, …, 130``, where column ``p`` is the
allocated GPU % of capacity once p % of the GPUs had arrived (``tune`` is the inflate
factor, 1.3). The unallocated GPU % at p % arrived is ``100 − column p``: the figure
``gangmaster replay --mode fill`` draws (:func:`~.metrics.unallocated_at_arrived`).

The artifact names its policies ``01-Random`` … ``06-FGD``; :data:`PAPER_POLICY` says which
of our selectors ports each. A workload is named as its pod list without the ``.csv``
(``openb_pod_list_default``), as the family runner names it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gangmaster.conf.fields import ConfigError
from gangmaster.conf.limits import MAX_FILL_INFLATE

from .trace_csv import BadRows, csv_rows, read_trace_text

#: The results file inside the artifact's expected_results folder.
ALLOCATION_FILE = "analysis_allo_discrete.csv"
#: Our selector -> the artifact's policy it ports (fgd-k8s scores as the paper's plugin does).
PAPER_POLICY = {"random-fit": "01-Random", "dot-product": "02-DotProd", "clustering": "03-GpuClustering",
                "packing": "04-GpuPacking", "best-fit": "05-BestFit", "fgd": "06-FGD", "fgd-k8s": "06-FGD"}
#: The artifact's FGD: the policy a new one is measured against.
PAPER_FGD = "06-FGD"
COLUMNS = ("workload", "sc_policy", "seed", "total_gpus")
#: Every arrived % column a fill up to MAX_FILL_INFLATE can have.
ARRIVED_COLUMNS = tuple(str(p) for p in range(int(100 * MAX_FILL_INFLATE) + 1))


@dataclass(frozen=True)
class ExpectedResults:
    """The artifact's unallocated GPU % at each arrived %, by workload, policy and seed."""

    source: str
    unallocated: dict[str, dict[str, dict[int, dict[int, float]]]]   # workload -> policy -> seed -> {p: %}

    def figure(self, workload: str, policy: str, seeds: list[int], arrived: int = 100) -> "ArtifactFigure | None":
        """The median over ``seeds`` of the artifact's unallocated GPU % at ``arrived`` %, over
        those of ``seeds`` it has (all of its seeds when it has none of them); None when it
        has no such workload, policy or column."""
        by_seed = self.unallocated.get(workload, {}).get(policy, {})
        values = {seed: points[arrived] for seed, points in by_seed.items() if arrived in points}
        used = sorted(seed for seed in seeds if seed in values) or sorted(values)
        if not used:
            return None
        return ArtifactFigure(policy, float(np.median([values[seed] for seed in used])), tuple(used))


@dataclass(frozen=True)
class ArtifactFigure:
    policy: str
    median: float
    seeds: tuple[int, ...]


def read_expected(path: str | Path) -> ExpectedResults:
    """``path``: the artifact's expected_results folder (its :data:`ALLOCATION_FILE` is read)
    or that file itself. A bad row is an error of the whole file, naming line and column."""
    path = Path(path)
    if path.is_dir():
        path = path / ALLOCATION_FILE
    if not path.is_file():
        raise ConfigError(str(path), "", f"the artifact's {ALLOCATION_FILE} (--expected: its folder or the file)")
    trace = read_trace_text(path)
    unallocated: dict[str, dict[str, dict[int, dict[int, float]]]] = {}
    for row in csv_rows(trace, BadRows("stop"), COLUMNS + ("100",), ("tune",) + ARRIVED_COLUMNS):
        seeds = unallocated.setdefault(row.name("workload"), {}).setdefault(row.name("sc_policy"), {})
        seed = row.integer("seed")
        if seed in seeds:
            raise row.error("seed", f"one row per workload, policy and seed (seed {seed} again)", seed)
        row.integer("total_gpus", minimum=1)
        seeds[seed] = {int(column): 100.0 - row.number(column, maximum=100.0)
                       for column in row.values if column.isdigit() and row.has(column)}
    if not unallocated:
        raise ConfigError(str(path), "", "at least one row of results")
    return ExpectedResults(str(path), unallocated)
