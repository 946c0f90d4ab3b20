"""``gangmaster bench …``: the benchmarks. Figures go to BENCHMARKS.md with their command.

Each benchmark module exposes ``add_parser(subparsers)``."""
from __future__ import annotations

import argparse
import importlib

BENCHES = [
    "rm",
    "select",
    "gang",
    "am",
    "barrier",
    "topology",
    "diagnose",
    "snapshot",
    "slurm",
    "yarn",
    "replay_report",
    "replay",
    "fgd",
    "openb_fill",
    "decisions",
    "big_gang",
]


def add_bench_parser(sub, name: str, help: str, doc: str | None) -> argparse.ArgumentParser:
    """One benchmark's parser: ``--help`` shows its module docstring whole, as written."""
    return sub.add_parser(name, help=help, description=doc,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def add_parser(sub):
    parser = sub.add_parser(
        "bench", help="measure speed against a baseline measured in the same run",
        description="Benchmarks. Each reports ratios against a baseline measured in the same "
                    "run; record figures in BENCHMARKS.md.")
    bench_sub = parser.add_subparsers(dest="bench", metavar="BENCHMARK")
    bench_sub.required = True
    for module in BENCHES:
        importlib.import_module(f"gangmaster.tools.bench.{module}").add_parser(bench_sub)
    return parser
