"""The ``gangmaster`` command. Each subcommand lives in its own module that exposes
``add_parser(subparsers)``; the parser it returns carries ``func(args) -> int``.

Only the module of the subcommand asked for is imported: the others bring in grpc,
numpy and networkx, a second and more that ``gangmaster --help`` has no use for. The
top-level help lists every subcommand from :data:`COMMANDS` (the one-line summary each
module gives its own parser: tests/unit/test_cli_help.py holds them equal)."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NamedTuple


class Command(NamedTuple):
    module: str   # under gangmaster.tools
    summary: str  # the module's own help= line, for the top-level --help


# One entry per subcommand, in --help order.
COMMANDS: dict[str, Command] = {
    "select": Command("select_cmd", "pick a node and GPUs for a request, and explain the choice"),
    "selectors": Command("selectors_cmd", "list the registered node-selection strategies"),
    "topo": Command("topo_cmd", "show a GPU topology (NVML, a `nvidia-smi topo -m` file, or a preset) and the "
                                "GPUs the topology strategy would choose"),
    "validate": Command("validate_cmd", "check a job spec (OpenPAI v2 + gangmaster: keys) and print it parsed"),
    "run": Command("run_cmd", "run a job through the ApplicationMaster on the RM simulator (or on Slurm or YARN: --rm)"),
    "am": Command("am_cmd", "run one job's ApplicationMaster against a running `gangmaster rm serve`"),
    "rm": Command("rm_cmd", "run the YARN-like ResourceManager simulator (live, over gRPC)"),
    "bench": Command("bench.cli", "measure speed against a baseline measured in the same run"),
    "diagnose": Command("diagnose_cmd", "say whether a job's gangs can start on a cluster, and if not why, in numbers"),
    "why": Command("why_cmd", "ask a running AM why its gangs are pending (its /why endpoint)"),
    "snapshot": Command("snapshot_cmd", "read a real cluster's snapshot (YARN, Kubernetes or Slurm JSON) and show "
                                        "what it says"),
    "slurm": Command("slurm_cmd", "a local Slurm cluster to run jobs on with `gangmaster run --rm slurm`"),
    "yarn": Command("yarn_cmd", "a local Apache Hadoop YARN cluster (ResourceManager + NodeManagers) on this machine"),
    "replay": Command("replay_cmd", "replay a workload trace through the AM and RM and compare placement policies"),
    "examples": Command("examples_cmd", "list the example jobs, clusters and topologies installed with gangmaster, "
                                        "or copy them into a folder"),
}

DESCRIPTION = """\
A YARN-style ApplicationMaster for distributed GPU jobs: topology-aware node and
GPU selection, all-or-nothing gang launch, gRPC barriers, and an RM simulator to
run it on."""

EPILOG = """\
Each COMMAND has its own --help. The example jobs, clusters and topologies (the
repository's conf/) are installed with the package: `gangmaster examples` lists
them, `gangmaster examples --copy DIR` copies them into DIR. From any folder:

  gangmaster examples --copy conf
  gangmaster run conf/jobs/mpi-allreduce.yaml"""


def version() -> str:
    """The installed distribution's version (its metadata: one source, pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version as installed
    try:
        return installed("gangmaster")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _PrintVersion(argparse.Action):
    """argparse's ``version`` action, reading the version only when asked: the metadata
    lookup costs a tenth of a second that every other command would pay."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"gangmaster {version()}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with ``command``'s full subparser (its module imported) and every other
    subcommand as its name and summary only; every subcommand in full when ``command`` is
    "*" (what a test of every help text wants)."""
    parser = argparse.ArgumentParser(
        prog="gangmaster",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_PrintVersion, nargs=0, help="print gangmaster's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, summary) in COMMANDS.items():
        if command in (name, "*"):
            importlib.import_module(f"gangmaster.tools.{module}").add_parser(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def _command_in(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top-level
    parser's options take no values)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(_command_in(argv)).parse_args(argv)
    from gangmaster.conf.fields import ConfigError  # (after the parse: --help has no need of it)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"gangmaster: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """Output piped to ``head`` and the like: stop quietly, as ``yes | head`` does.

    Python reports the closed pipe once more when it flushes stdout at exit;
    pointing stdout at /dev/null first keeps that from printing a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13  # the shell's status for a process ended by SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
