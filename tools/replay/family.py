"""``gangmaster replay --workloads DIR``: a whole family of openb pod lists in fill mode,
every policy on every list with every seed, in one comparison (issue 32).

A family is a folder of ``openb_pod_list_*.csv`` (the FGD artifact's ``data/csv``: the
default list and the lists that weight CPU-only, shared-GPU, multi-GPU or GPU-model-bound
pods), each filled against one node list the paper's way (:func:`~.openb.fill_plan`).
Each replay is one task (workload, seed, selector): :func:`run_family` runs them one after
the other, or in ``jobs`` processes (each replay is single-threaded; a process keeps the
pod lists it read and the fill plans it built). Everything is read and checked before the
first replay, so bad input fails at once, not an hour in.

Of each replay only what the comparison needs is kept (:class:`ReplayFigures`): the
unallocated GPU % at 100 % arrived, pods placed and dropped, and what its decisions cost
(the select() calls the replay timed: ``select_s / decisions`` is the per-pod decision time,
measured in the same run for every policy). :func:`family_document` reduces them to the
report's document: per workload and policy the median over seeds (and IQR), the artifact's
figure for the paper's counterpart (:mod:`.artifact`) when given, the best policy and its
margin over FGD.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import multiprocessing
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from gangmaster.conf.fields import ConfigError

from . import openb
from .artifact import PAPER_FGD, PAPER_POLICY, ExpectedResults
from .clusters import ReplayCluster
from .comparison import gangmaster_version
from .engine import ReplayOptions, replay
from .metrics import JobColumns, fill_curve

#: The pod lists of a family: the artifact's names.
POD_LIST_GLOB = "openb_pod_list_*.csv"
#: The paper's seeds (the artifact's expected results are for these).
PAPER_SEEDS = tuple(range(42, 52))
#: The arrived % the comparison reads: once the pods arrived ask for every GPU.
ARRIVED_PCT = 100
#: Our FGD, the policy a new one must beat as well as the paper's.
OUR_FGD = "fgd"
#: The paper's FGD as its plugin scores (the decision time every policy's is set beside).
PAPER_FGD_PORT = "fgd-k8s"
#: The file of a family's report folder that keeps each finished replay's figures
#: (:class:`ReplayLog`).
REPLAYS_FILE = "replays.jsonl"


@dataclass(frozen=True)
class Workload:
    """One pod list of a family, named as the artifact names it (the file's stem)."""

    name: str
    pods_path: Path

    @property
    def short(self) -> str:
        """The name without ``openb_pod_list_`` (``default``, ``cpu200``): what tables show."""
        return self.name.removeprefix("openb_pod_list_")


@dataclass(frozen=True)
class FamilyOptions:
    seeds: tuple[int, ...] = PAPER_SEEDS
    selectors: tuple[str, ...] = ()
    inflate: float = openb.DEFAULT_INFLATE
    jobs: int = 1
    #: whose random draws order the pods and the exact ties (:data:`~.openb.FILL_DRAWS`)
    draws: str = "python"


@dataclass(frozen=True)
class ReplayFigures:
    """What the comparison keeps of one replay."""

    workload: str
    selector: str
    seed: int
    pods: int
    placed: int
    dropped: int
    unallocated_pct: float | None    # at ARRIVED_PCT % arrived; None when the fill never got there
    decisions: int
    decision_s: float
    wall_s: float


@dataclass(frozen=True)
class Family:
    """A family run: its inputs and every replay's figures."""

    folder: Path
    nodes_path: Path
    cluster: ReplayCluster
    workloads: tuple[Workload, ...]
    pods: dict[str, openb.Pods]
    options: FamilyOptions
    figures: tuple[ReplayFigures, ...]
    wall_s: float
    resumed: int = 0          # of the figures, how many an earlier run's ReplayLog gave


def find_workloads(folder: str | Path) -> tuple[Workload, ...]:
    """The pod lists of ``folder`` (:data:`POD_LIST_GLOB`), by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(str(folder), "", "a folder of openb pod lists (--workloads DIR)")
    found = tuple(Workload(path.stem, path) for path in sorted(folder.glob(POD_LIST_GLOB)) if path.is_file())
    if not found:
        raise ConfigError(str(folder), "", f"a folder holding openb pod lists ({POD_LIST_GLOB})")
    return found


def read_family(folder: str | Path, nodes_file: str | Path | None, options: FamilyOptions
                ) -> tuple[tuple[Workload, ...], ReplayCluster, Path, dict[str, openb.Pods]]:
    """Read and check every input before any replay: the node list (``nodes_file``, or
    :data:`~.openb.DEFAULT_NODE_FILE` in ``folder``), each pod list (read as fill mode reads
    it: no times needed), and that each fills with the options (one plan built per list)."""
    workloads = find_workloads(folder)
    nodes_path = Path(nodes_file) if nodes_file else Path(folder) / openb.DEFAULT_NODE_FILE
    cluster = openb.read_openb_nodes(nodes_path)
    pods = {w.name: _pods(str(w.pods_path)) for w in workloads}
    for w in workloads:
        openb.plan_for(options.draws, pods[w.name], cluster, options.seeds[0], options.inflate)
    return workloads, cluster, nodes_path, pods


@functools.lru_cache(maxsize=None)
def _pods(path: str) -> openb.Pods:
    return openb.read_openb_pods(path, need_times=False)


@functools.lru_cache(maxsize=4)
def _plan(pods_path: str, nodes_path: str, seed: int, inflate: float, draws: str) -> openb.FillPlan:
    return openb.plan_for(draws, _pods(pods_path), _cluster(nodes_path), seed, inflate)


@functools.lru_cache(maxsize=2)
def _cluster(nodes_path: str) -> ReplayCluster:
    return openb.read_openb_nodes(nodes_path)


Task = tuple[str, str, str, int, str, float, str]   # workload, pods path, nodes path, seed, selector, inflate, draws


def replay_task(task: Task) -> ReplayFigures:
    """One replay of a family (module-level: a worker process runs it)."""
    workload, pods_path, nodes_path, seed, selector, inflate, draws = task
    plan = _plan(pods_path, nodes_path, seed, inflate, draws)
    result = replay(plan.table, _cluster(nodes_path), ReplayOptions(selector=selector, queue_policy="drop", seed=seed,
                                                                    tie_hosts=plan.tie_hosts))
    curve = fill_curve(plan.table, result, plan.capacity_milli)
    reached = curve.arrived[-1] >= ARRIVED_PCT * curve.capacity_milli
    jobs = JobColumns.of(result.jobs)
    return ReplayFigures(workload, selector, seed, len(result.jobs), int(np.count_nonzero(jobs.started)),
                         int(np.count_nonzero(jobs.outcome == "dropped")),
                         float(100.0 - curve.at(np.array([ARRIVED_PCT]))[0]) if reached else None,
                         result.select_calls, result.select_s, result.wall_s)


def run_family(folder: str | Path, nodes_file: str | Path | None, options: FamilyOptions,
               on_done: Callable[[ReplayFigures, int, int], None] = lambda figures, done, total: None,
               log: ReplayLog | None = None) -> Family:
    """Every selector on every workload of ``folder`` with every seed; ``on_done(figures,
    done, total)`` after each replay (in the order they finish; first those ``log`` held
    from an earlier run, which are not run again). Each finished replay goes to ``log``."""
    if not options.selectors:
        raise ValueError("run_family: no selectors")
    started = time.perf_counter()
    workloads, cluster, nodes_path, pods = read_family(folder, nodes_file, options)
    _cluster(str(nodes_path))   # read once here: forked workers inherit it and the pod lists
    tasks = [(w.name, str(w.pods_path), str(nodes_path), seed, selector, options.inflate, options.draws)
             for w in workloads for seed in options.seeds for selector in options.selectors]
    earlier = log.figures() if log is not None else {}
    figures = [earlier[_key(t)] for t in tasks if _key(t) in earlier]
    for count, figure in enumerate(figures, 1):
        on_done(figure, count, len(tasks))
    resumed = len(figures)
    for figure in _run_tasks([t for t in tasks if _key(t) not in earlier], options.jobs):
        if log is not None:
            log.add(figure)
        figures.append(figure)
        on_done(figure, len(figures), len(tasks))
    order = {_key(t): k for k, t in enumerate(tasks)}
    figures.sort(key=lambda f: order[(f.workload, f.seed, f.selector)])
    return Family(Path(folder), nodes_path, cluster, workloads, pods, options, tuple(figures),
                  time.perf_counter() - started, resumed)


def _key(task: Task) -> tuple[str, int, str]:
    """A replay's (workload, seed, selector): how a family and its log name it."""
    return task[0], task[3], task[4]


class ReplayLog:
    """Each finished replay's figures, a JSON line each, in the report folder
    (:data:`REPLAYS_FILE`): a family run is hours of replays, and one stopped for any reason
    (a kill, the machine's end, Ctrl-C) resumes from the same ``--report DIR`` without
    running again what it finished. The first line says which run the replays belong to
    (the inputs' contents, ``--inflate``, ``--draws``); a folder holding another run's
    replays is refused, naming what differs. Each line names the gangmaster version that ran
    it. A line cut short by a kill is dropped."""

    def __init__(self, path: Path, run: dict[str, Any]):
        self.path, self.run = path, run
        self._figures: dict[tuple[str, int, str], ReplayFigures] = {}
        if path.exists():
            self._read()
        else:
            self._append({"run": run})

    @classmethod
    def for_family(cls, folder: str | Path, workloads: Sequence[Workload], nodes_path: Path,
                   options: FamilyOptions) -> ReplayLog:
        """The log of ``folder`` (the report folder) for this family run."""
        run = {"nodes_file": _digest(nodes_path), "inflate": options.inflate, "draws": options.draws,
               "pod_lists": {w.name: _digest(w.pods_path) for w in workloads}}
        return cls(Path(folder) / REPLAYS_FILE, run)

    def figures(self) -> dict[tuple[str, int, str], ReplayFigures]:
        """The replays an earlier run finished, by (workload, seed, selector)."""
        return dict(self._figures)

    def add(self, figures: ReplayFigures) -> None:
        self._append({"replay": dataclasses.asdict(figures), "gangmaster": gangmaster_version()})

    def _append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def _read(self) -> None:
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):      # a write cut short: drop it, append after the rest
            text = text[:text.rfind("\n") + 1]
            self.path.write_text(text, encoding="utf-8")
        lines = text.splitlines()
        try:
            first = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            first = {}
        if "run" not in first:
            raise ConfigError(str(self.path), "line 1", "a family run's replays (its first line names the run); "
                                                         "remove the file or give another --report DIR")
        differs = [key for key in ("nodes_file", "inflate", "draws") if first["run"].get(key) != self.run[key]]
        differs += [f"pod list {name}" for name, digest in first["run"].get("pod_lists", {}).items()
                    if self.run["pod_lists"].get(name, digest) != digest]
        if differs:
            raise ConfigError(str(self.path), "line 1", f"replays of this run to resume (it holds another run's: "
                                                         f"{', '.join(differs)} differ); remove the file or give "
                                                         "another --report DIR")
        for number, line in enumerate(lines[1:], 2):
            try:
                figures = ReplayFigures(**json.loads(line)["replay"])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ConfigError(str(self.path), f"line {number}", f"a replay's figures ({exc})") from None
            self._figures[(figures.workload, figures.seed, figures.selector)] = figures


def _digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _run_tasks(tasks: Sequence[Task], jobs: int):
    if jobs <= 1 or len(tasks) <= 1:
        yield from map(replay_task, tasks)
        return
    with multiprocessing.get_context("fork").Pool(min(jobs, len(tasks))) as pool:
        yield from pool.imap_unordered(replay_task, tasks)


# ------------------------------------------------------------------ the document

def spread_of(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p25": None, "p75": None}
    return {key: round(float(np.percentile(values, q)), 3) for key, q in (("median", 50), ("p25", 25), ("p75", 75))}


def family_document(family: Family, expected: ExpectedResults | None = None) -> dict[str, Any]:
    """The family report's document (family.json): see the module docstring and
    :func:`_workload_entry`. Same inputs, same document but for the timings
    (``wall_s``, ``decision_us_per_pod``)."""
    seeds = list(family.options.seeds)
    workloads = {w.short: _workload_entry(family, w, expected, seeds) for w in family.workloads}
    selectors = list(family.options.selectors)
    decisions = {}
    for name in selectors:
        runs = [f for f in family.figures if f.selector == name]
        calls = sum(f.decisions for f in runs)
        decisions[name] = {"decisions": calls,
                           "us_per_decision": round(1e6 * sum(f.decision_s for f in runs) / calls, 1) if calls else None,
                           "replay_wall_s": round(sum(f.wall_s for f in runs), 2)}
    beats = [name for name in selectors if expected is not None and all(
        entry["selectors"][name]["vs_paper_fgd_pp"] is not None and entry["selectors"][name]["vs_paper_fgd_pp"] < 0
        for entry in workloads.values())]
    return {"run": {"workloads": str(family.folder), "nodes_file": str(family.nodes_path),
                    "cluster": {"name": family.cluster.name, "nodes": len(family.cluster.specs),
                                "gpus": family.cluster.capacity_gpus},
                    "seeds": seeds, "selectors": selectors, "inflate": family.options.inflate,
                    "draws": family.options.draws, "arrived_pct": ARRIVED_PCT, "processes": family.options.jobs,
                    "expected": expected.source if expected else None,
                    "paper_policy": {name: PAPER_POLICY.get(name) for name in selectors},
                    "version": gangmaster_version(), "wall_s": round(family.wall_s, 1),
                    "resumed": family.resumed},
            "workloads": workloads,
            "decision_us_per_pod": decisions,
            "beat_paper_fgd_everywhere": beats}


def _workload_entry(family: Family, workload: Workload, expected: ExpectedResults | None,
                    seeds: list[int]) -> dict[str, Any]:
    """One workload: per selector the unallocated GPU % at 100 % arrived over the seeds, the
    artifact's figure for its paper counterpart, and how far from the paper's FGD; the best
    selector and its margins over the paper's FGD and over our ``fgd`` (> 0: it leaves fewer
    GPUs unallocated)."""
    pods = family.pods[workload.name]
    paper_fgd = expected.figure(workload.name, PAPER_FGD, seeds) if expected else None
    selectors = {}
    for name in family.options.selectors:
        runs = [f for f in family.figures if f.workload == workload.name and f.selector == name]
        values = [f.unallocated_pct for f in runs if f.unallocated_pct is not None]
        spread = spread_of(values)
        policy = PAPER_POLICY.get(name)
        artifact = expected.figure(workload.name, policy, seeds) if expected and policy else None
        calls = sum(f.decisions for f in runs)
        selectors[name] = {
            "unallocated_pct": {**spread, "by_seed": {str(f.seed): f.unallocated_pct for f in runs}},
            "dropped": float(np.median([f.dropped for f in runs])),
            "us_per_decision": round(1e6 * sum(f.decision_s for f in runs) / calls, 1) if calls else None,
            "artifact": ({"policy": artifact.policy, "median": round(artifact.median, 3), "seeds": list(artifact.seeds)}
                         if artifact else None),
            "vs_artifact_pp": _difference(spread["median"], artifact.median if artifact else None),
            "vs_paper_fgd_pp": _difference(spread["median"], paper_fgd.median if paper_fgd else None),
        }
    ranked = sorted((entry["unallocated_pct"]["median"], name) for name, entry in selectors.items()
                    if entry["unallocated_pct"]["median"] is not None)
    best = None
    if ranked:
        median, name = ranked[0]
        ours = selectors.get(OUR_FGD, {}).get("unallocated_pct", {}).get("median")
        best = {"selector": name, "median": median,
                "margin_over_paper_fgd_pp": _difference(paper_fgd.median if paper_fgd else None, median),
                "margin_over_fgd_pp": _difference(ours, median)}
    return {"pods_file": str(workload.pods_path), "sha256": pods.sha256, "pods": len(pods.pods),
            "paper_fgd": round(paper_fgd.median, 3) if paper_fgd else None,
            "selectors": selectors, "best": best}


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 3)


def without_timing(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` without what varies run to run (wall and decision times)."""
    run = {k: v for k, v in document["run"].items() if k != "wall_s"}
    workloads = {name: {**entry, "selectors": {s: {k: v for k, v in e.items() if k != "us_per_decision"}
                                               for s, e in entry["selectors"].items()}}
                 for name, entry in document["workloads"].items()}
    return {**document, "run": run, "workloads": workloads,
            "decision_us_per_pod": {name: {"decisions": d["decisions"]}
                                    for name, d in document["decision_us_per_pod"].items()}}
