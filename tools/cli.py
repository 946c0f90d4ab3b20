"""The ``gangmaster`` command. Each subcommand lives in its own module that exposes
``add_parser(subparsers)``; the parser it returns carries ``func(args) -> int``."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from gangmaster.conf.fields import ConfigError

# (module under gangmaster.tools) — one line per subcommand, in --help order.
COMMANDS = [
    "select_cmd",
    "selectors_cmd",
    "topo_cmd",
    "validate_cmd",
    "run_cmd",
    "am_cmd",
    "rm_cmd",
    "bench.cli",
    "diagnose_cmd",
    "why_cmd",
    "snapshot_cmd",
    "slurm_cmd",
    "yarn_cmd",
    "replay_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gangmaster",
        description="A YARN-style ApplicationMaster for distributed GPU jobs: topology-aware "
                    "node and GPU selection, all-or-nothing gang launch, gRPC barriers, and an "
                    "RM simulator to run it on.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMANDS:
        importlib.import_module(f"gangmaster.tools.{module}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
