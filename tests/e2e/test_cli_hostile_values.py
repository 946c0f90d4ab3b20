"""Every option of every command, given a hostile value, ends in a message and an exit
status (0, 1 or 2), never a traceback: the class of defect the reliability campaign found
in `select --gpu-indices 99`, `run --metrics-port 99999` and most benchmarks' counts."""
from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import pytest

from gangmaster.tools.cli import build_parser, main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HOSTILE = ["nan", "-inf", "-1", "0", "1e309", "99999999999999999999", "", "x", "0,x", "-"]
#: Commands that would start a server or a long measurement when a value is accepted:
#: only their parsing is checked (a typed option must refuse what is not its type).
PARSE_ONLY = ("bench", "rm serve")
#: Options whose value the test itself must choose (where the output goes).
CHOSEN = {"work_dir", "json_path"}


def leaf_commands(parser=None, prefix=()):
    parser = parser or build_parser("*")   # every subcommand in full, not its summary only
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield prefix, parser
    for action in subcommands:
        for name, sub in action.choices.items():
            yield from leaf_commands(sub, prefix + (name,))


def cases():
    for prefix, parser in leaf_commands():
        for action in parser._actions:
            if action.option_strings and action.nargs != 0 and action.dest not in CHOSEN | {"help"}:
                for value in HOSTILE:
                    yield pytest.param(prefix, action, value, id=f"{' '.join(prefix)} {action.option_strings[0]}={value!r}")


def required_arguments(prefix, tmp_path) -> list[str]:
    command = " ".join(prefix)
    if command in ("run", "validate"):
        extra = [str(REPO / "conf/jobs/mpi-allreduce.yaml")]
        return extra + (["--work-dir", str(tmp_path / "run"), "-q"] if command == "run" else [])
    if command == "am":   # an RM that cannot be reached: every value is checked before it is called
        return [str(REPO / "conf/jobs/mpi-allreduce.yaml"), "--rm", "127.0.0.1:1", "--work-dir",
                str(tmp_path / "run"), "-q"]
    if command in ("rm nodes", "rm fault"):
        return ["--address", "127.0.0.1:1"] + (["lose_node", "--host", "h"] if command == "rm fault" else [])
    return []


def test_every_command_is_searched_for_options():
    """The cases come from every subcommand's own parser: a parser that shows only names (the
    CLI builds its subcommands lazily) would leave this file with nothing to test."""
    commands = {" ".join(prefix) for prefix, _ in leaf_commands()}
    assert {"run", "am", "replay", "select", "diagnose", "bench select", "rm serve", "yarn local-cluster"} <= commands
    assert len(list(cases())) > 500


@pytest.mark.parametrize("prefix, action, value", list(cases()))
def test_a_hostile_value_is_refused_or_handled_never_a_traceback(tmp_path, monkeypatch, prefix, action, value):
    monkeypatch.chdir(tmp_path)
    argv = [*prefix, *required_arguments(prefix, tmp_path), action.option_strings[0], value]
    out, err = io.StringIO(), io.StringIO()
    parse_only = any(" ".join(prefix).startswith(p) for p in PARSE_ONLY)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if parse_only:
                build_parser("*").parse_args(argv)
                status = None
            else:
                status = main(argv)
        except SystemExit as exc:   # argparse refusing the value (or --help-like exits)
            status = exc.code
    if parse_only and status is None:
        # accepted: then it must be a value of the option's type that means something
        assert action.type is None or value not in ("nan", "-inf", "-1", "1e309", "x", "0,x", "-", ""), \
            f"{argv}: a typed option accepted {value!r}"
        return
    assert status in (0, 1, 2), f"{argv}: exit {status}\n{err.getvalue()[-2000:]}"
    assert "Traceback" not in err.getvalue() + out.getvalue()
