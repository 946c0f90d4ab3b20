"""Every `gangmaster bench X` at a tiny size: it finishes and prints its figure. The
benchmarks are found in the bench CLI's parser, so a new one fails here until the table
gives it a size (a bench with no size small enough gets a flag for one, not a skip); the
one that needs Slurm skips, saying why, where Slurm cannot run. Real traces are never
read: the trace benchmarks get the small fixtures."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from gangmaster.tools.bench import cli as bench_cli
from gangmaster.tools.cli import main

TESTS = Path(__file__).resolve().parents[1]
REPLAY = TESTS / "fixtures" / "replay"
PHILLY = str(REPLAY / "philly_small.csv")
PODS = str(REPLAY / "openb" / "pods_small.csv")
OPENB_NODES = str(REPLAY / "openb" / "openb_node_list_gpu_node.csv")


def _benches() -> list[str]:
    """The benchmarks `gangmaster bench` offers, from its parser."""
    bench = bench_cli.add_parser(argparse.ArgumentParser().add_subparsers())
    (benches,) = [a for a in bench._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(benches.choices)


#: bench -> (its arguments at a tiny size, a figure its output must show)
SIZES = {
    "rm": (["--nodes", "20", "--events", "2000", "--allocations", "50", "--calls", "20"],
           r"event loop: +[\d,]+ events/s.*\nallocation: +[\d,]+ containers/s.*\ngRPC: +allocate \d+ us"),
    "select": (["--nodes", "200", "--requests", "60", "--selector", "best-fit"],
               r"200 best-fit +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+x +[\d.]+x +[\d.]+x +[\d.]+x +\d+\n(.*\n)*"
               r" +200 floor \(sorted\) +[\d.]+\n +200 floor \(same\) +[\d.]+ .*\n(.*\n)*.*ClusterView: \d+ bytes/node(.*\n)*"
               r"peak RSS: \d+ MB"),
    "gang": (["--servers", "10", "--workers", "10", "--repeat", "1"],
             r"placed 21 instances(.*\n)*placement decision: [\d.]+ ms wall"),
    "am": (["--repeat", "1", "--stuck-s", "60"],
           r"6001 tasks on 3040 nodes, started together, succeeded\nwhole AM run .*: [\d.]+ s wall"),
    "barrier": (["--tasks", "2", "--rounds", "3", "--warmup", "1", "--ping-calls", "20", "--ping-load-calls", "0"],
                r"\n +2 +tree +2 +3 +[\d.]+ +[\d.]+ "),
    "topology": (["--trials", "10", "--steps", "50", "--calls", "50", "--nodes", "50", "--presets", "dgx1-v100"],
                 r"all keys computed: +topology [\d.]+ ms"),
    "diagnose": (["--repeat", "1", "--wait-s", "60"], r"diagnosis: [\d.]+ s wall(.*\n)*waiting 60 s of virtual time"),
    "snapshot": (["--cluster", str(TESTS / "fixtures" / "rm" / "cluster.yaml"), "--repeat", "1"],
                 r"slurm +\d+ nodes.*load_snapshot \d+ ms wall"),
    "slurm": (["--repeat", "1"], r"ratio slurm / baseline: [\d.]+"),
    # on the session's shared YARN cluster (tests/e2e/yarn_cluster.py), not one of its own
    "yarn": (["--repeat", "1", "--no-slurm"], r"ratio yarn / baseline: [\d.]+"),
    "replay_report": (["--trace", PHILLY, "--selectors", "1", "--repeat", "1"], r"report: [\d.]+ s wall"),
    "replay": (["--trace", PHILLY, "--nodes", "4", "--limit", "20"], r"engine fifo +: +[\d.]+ s wall"),
    "big_gang": (["--nodes", "2", "--minutes", "12"],
                 r"\n  reserve +[\d,]+ s +[\d.]+ s +\d+ s +\d+ s +[\d,]+ s +[\d.]+ GPU-h +[\d.]+ s"),
    "fgd": (["--nodes", "20", "--pods", "100", "--selector", "fgd"], r"\nfgd +seeded +[\d.]+ +[\d.]+ +\d+"),
    "openb_fill": (["--pods", PODS, "--nodes-file", OPENB_NODES, "--selector", "random"],
                   r"random +: +[\d.]+ s wall = +[\d.]+ x floor"),
    "decisions": (["--trace", PHILLY, "--jobs", "9", "--pods", PODS],
                  r"philly-9-1000x8-fifo +[0-9a-f]{16} +[\d,]+ placements(.*\n)*openb-fill-seed42-fgd +[0-9a-f]{16}"),
}


@pytest.mark.parametrize("bench", _benches())
def test_every_bench_finishes_at_a_tiny_size_and_prints_its_figure(bench, capsys, request):
    assert bench in SIZES, f"bench {bench}: add its tiny size to SIZES (add a size flag if it has none)"
    arguments, figure = SIZES[bench]
    if bench == "slurm":
        from slurm_cluster import require_slurm

        require_slurm()
    if bench == "yarn":
        cluster = request.getfixturevalue("yarn_cluster")  # skips, saying why, without Java or Maven
        arguments = [*arguments, "--yarn-rm", str(cluster.work_dir)]
    code = main(["bench", bench, *arguments])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(figure, out), out


def test_the_table_names_only_benches_there_are():
    assert set(SIZES) <= set(_benches())
