"""`gangmaster bench decisions` prints the same digest for the same decisions, and another
one when any decision differs: it is how a speed change shows that it changed none."""
import dataclasses
from pathlib import Path

from gangmaster.tools.bench.decisions import PHILLY_CONFIGS, digest
from gangmaster.tools.cli import main
from gangmaster.tools.replay.clusters import sized
from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.philly import read_philly

PHILLY_SMALL = Path(__file__).parents[1] / "fixtures" / "replay" / "philly_small.csv"


def _replayed(nodes: int = 4):
    cluster = sized(nodes, 8)
    return replay(read_philly(PHILLY_SMALL, cluster.gpu_node_shape()), cluster, ReplayOptions())


def test_the_same_decisions_give_the_same_digest():
    assert digest(_replayed()) == digest(_replayed())


def test_any_changed_decision_changes_the_digest():
    result = _replayed()
    first = result.jobs[0]
    moved = dataclasses.replace(first, start_s=first.start_s + 1.0)
    assert digest(dataclasses.replace(result, jobs=(moved, *result.jobs[1:]))) != digest(result)
    assert digest(dataclasses.replace(result, select_calls=result.select_calls + 1)) != digest(result)
    assert digest(_replayed(nodes=2)) != digest(result)   # a smaller cluster makes jobs wait


def test_the_command_prints_one_line_per_configuration(capsys, tmp_path):
    assert main(["bench", "decisions", "--trace", str(PHILLY_SMALL), "--jobs", "9", "--opcodes",
                 "--pods", str(tmp_path / "absent.csv")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(PHILLY_CONFIGS) + 1 and "openb lines skipped" in lines[-1]
    for line in lines[:-1]:
        label, hexdigest, *rest = line.split()
        assert label.startswith("philly-") and len(hexdigest) == 16 and "bytecodes/job" in line
        assert int(rest[-2].replace(",", "")) > 0   # bytecodes per job counted
