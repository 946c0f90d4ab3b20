"""Every ``--help`` answers the question it is asked: nothing cut off, nothing twice; and
the top level answers at once (it imports no subcommand)."""
import argparse
import importlib
import subprocess
import sys
from importlib import metadata

import pytest

from gangmaster.tools.bench.cli import BENCHES
from gangmaster.tools.cli import COMMANDS, build_parser, main


@pytest.mark.parametrize("bench", BENCHES)
def test_bench_help_shows_the_whole_module_text(capsys, bench):
    with pytest.raises(SystemExit):
        main(["bench", bench, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    doc = importlib.import_module(f"gangmaster.tools.bench.{bench}").__doc__
    last_paragraph = " ".join(doc.strip().split("\n\n")[-1].split())
    assert last_paragraph in out


#: what only a subcommand needs: `gangmaster --help` and `--version` must not import them
HEAVY_MODULES = ("grpc", "numpy", "networkx", "yaml", "google.protobuf", "prometheus_client")
LIGHT_ARGS = [["--help"], ["--version"], ["-h"], []]


@pytest.mark.parametrize("args", LIGHT_ARGS, ids=lambda a: " ".join(a) or "no-args")
def test_the_top_level_imports_no_subcommand(args):
    # The guard of the lazy import: every subcommand's module pulls grpc, numpy or
    # networkx in, which took --help to two seconds.
    probe = ("import sys\nfrom gangmaster.tools.cli import main\n"
             f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
             f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def test_the_top_level_summaries_are_the_subcommands_own():
    sub = next(a for a in build_parser("*")._actions if isinstance(a, argparse._SubParsersAction))
    assert {action.dest: action.help for action in sub._choices_actions} == \
        {name: command.summary for name, command in COMMANDS.items()}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_has_its_own_help(capsys, command):
    with pytest.raises(SystemExit) as exit:
        main([command, "--help"])
    assert exit.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: gangmaster {command} ")


def test_the_top_level_help_says_where_the_examples_are(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "gangmaster examples --copy conf" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["gangmaster"], [sys.executable, "-m", "gangmaster"]], ids=["script", "-m"])
def test_version_names_the_installed_distribution(tmp_path, command):
    out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"gangmaster {metadata.version('gangmaster')}"
