"""The fast tier (README: *Tests*) runs one layer's unit and property tests: every test file
belongs to exactly one of its layers, read from what the file imports (tests/layers.py)."""
from pathlib import Path

import pytest

from layers import FAST_TIER, ROOT, layer_files, main, part_of, unit_and_property_files


def test_every_unit_and_property_test_file_belongs_to_one_layer_of_the_fast_tier():
    unplaced = [path.name for path in unit_and_property_files() if part_of(path) not in FAST_TIER]
    assert unplaced == [], "import what the file tests, or name it in layers.READS_FILES"
    runs = [path for layer in FAST_TIER for path in layer_files(layer)]
    assert sorted(runs) == sorted(unit_and_property_files())   # each file in one layer's run, none in two


@pytest.mark.parametrize("source, part", [
    ("from gangmaster.selectors.cluster import ClusterView\n", "selectors"),
    ("from gangmaster.selectors.cluster import ClusterView\ndef f():\n    from gangmaster.am.core import master\n", "am"),
    ("from gangmaster.tools.cli import main\nfrom gangmaster.tools.rmsim.core import RMCore\n", "tools.rmsim"),
    ("from gangmaster.tools import job_runner\n", "tools.run"),
    ("from gangmaster.tools.job_runner import SimulatedRuns\nfrom gangmaster.tools.rmsim import core\n", "tools.run"),
    ("import gangmaster.tools.replay.engine\nfrom gangmaster.tools.bench.cli import BENCHES\n", "tools.bench"),
    ("from gangmaster.tools.cli import main\n", "tools.cli"),
    ("import json\n", None),
])
def test_a_file_s_layer_is_the_highest_it_imports_and_in_tools_the_most_specific_part(tmp_path, source, part):
    probe = tmp_path / "test_probe.py"
    probe.write_text(source)
    assert part_of(probe) == part


def test_the_command_prints_the_files_of_a_layer(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["gpu_topology"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed and [ROOT / p for p in printed] == layer_files("gpu_topology")
    assert all(Path(p).parts[0] == "tests" for p in printed)
    assert main(["nope"]) == 2 and "one of conf, gpu_topology" in capsys.readouterr().err
