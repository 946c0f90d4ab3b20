"""The live RM's state file is read like every other file (issue 10): bounded, regular
files only, no NaN, and a restored state must hold together, else a ConfigError names
the file. ``rm serve --state`` on a FIFO used to block forever before it listened."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.tools.rmsim import state
from gangmaster.tools.rmsim.clock import VirtualLoop
from gangmaster.tools.rmsim.nodemanager import SimulatedNodeManager
from gangmaster.tools.rmsim.simulation import Simulation

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def saved(tmp_path: Path, change=None) -> Path:
    """A valid state file of the test cluster, with ``change(data)`` applied."""
    data = state.snapshot(Simulation.from_files(FIX / "cluster.yaml").core)
    if change:
        change(data)
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    return path


def load(path: Path):
    loop = VirtualLoop()
    return state.load(path, loop, SimulatedNodeManager(loop))


@pytest.mark.parametrize("change,expected", [
    (lambda d: d["nodes"][0].update(vcores=float("nan")), "NaN is not a number this file can hold"),
    (lambda d: d.update(time=float("inf")), "Infinity is not a number this file can hold"),
    (lambda d: d.update(time="soon"), 'time: expected the RM clock\'s time, a number of seconds >= 0, got "soon"'),
    (lambda d: d["queues"][0].update(max_mem=None), "queue default: limits must be integers >= 0"),
    (lambda d: d["nodes"][2].update(memory_mb=-1), "node pcie-000: memory_mb, vcores and gpus must be counts"),
    (lambda d: d["nodes"][0].update(ports=[[20000]]), "a consistent RM state file (IndexError"),
])
def test_a_state_that_does_not_hold_together_is_refused(tmp_path, change, expected):
    path = saved(tmp_path, change)
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value).startswith(str(path)) and expected in str(info.value)


def test_rm_serve_refuses_a_state_path_that_is_a_fifo(tmp_path):
    fifo = tmp_path / "state.json"
    os.mkfifo(fifo)
    result = subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", "rm", "serve", "--cluster",
                             str(FIX / "cluster.yaml"), "--state", str(fifo), "--work-dir", str(tmp_path / "t")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"{fifo}: expected a regular file, not a FIFO" in result.stderr
