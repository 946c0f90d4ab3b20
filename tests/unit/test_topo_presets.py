"""Topology presets: every shipped one loads, matches the hardware it names, and a bad
preset file fails naming the file, the field and the cell."""
from pathlib import Path

import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.gpu_topology.links import Link, nvlink
from gangmaster.gpu_topology.presets import UnknownPreset, load_preset, load_preset_file, preset_names
from gangmaster.gpu_topology.topo_text import read_topo_file
from gangmaster.selectors.cluster_file import load_cluster_specs, default_cluster_path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topo"
REQUIRED = ["dgx1-v100", "dgx1-p100", "dgx-a100", "dgx-h100", "k80-8gpu", "pcie-4gpu", "pcie-8gpu-2socket"]


def test_required_presets_ship():
    assert set(REQUIRED) <= set(preset_names())


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads_with_its_own_name(name):
    t = load_preset(name)
    assert t.name == name and t.description
    assert all(len(row) == t.gpu_count for row in t.label_matrix())


def test_cluster_files_name_presets_that_exist():
    names = {spec.topology for spec in load_cluster_specs(default_cluster_path()) if spec.topology}
    assert names and names <= set(preset_names())


@pytest.mark.parametrize("preset, real", [
    ("dgx1-v100", "topo_dgx1_v100.txt"),
    ("dgx-a100", "topo_dgx_a100.txt"),
    ("pcie-8gpu-2socket", "topo_dgx1_pcie_only_mp.txt"),
])
def test_presets_taken_from_real_outputs_match_them(preset, real):
    a, b = load_preset(preset), read_topo_file(FIXTURES / real)
    assert a.label_matrix() == b.label_matrix()
    assert sorted(a.nics) == sorted(b.nics)
    assert all(a.nic_link(n, i) == b.nic_link(n, i) for n in a.nics for i in range(a.gpu_count))
    assert [x.cpus for x in a.affinity] == [x.cpus for x in b.affinity]


def test_dgx1_p100_cube_mesh():
    t = load_preset("dgx1-p100")
    for i in range(8):
        peers = [j for j in range(8) if j != i and t.link(i, j).is_nvlink]
        assert len(peers) == 4 and all(t.link(i, j) == nvlink(1) for j in peers)
        assert (i + 4) % 8 in peers
    assert t.nvlink_cliques()[:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("name, count, links", [("dgx-h100", 8, 18), ("dgx-a100", 8, 12), ("dgx2", 16, 6)])
def test_nvswitch_presets_are_one_clique(name, count, links):
    t = load_preset(name)
    assert t.gpu_count == count and t.nvlink_cliques() == [list(range(count))]
    assert t.link(0, count - 1) == nvlink(links)


def test_k80_four_dual_gpu_boards():
    t = load_preset("k80-8gpu")
    boards = [(i, j) for i in range(8) for j in range(i + 1, 8) if t.link(i, j) == Link("BOARD")]
    assert boards == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert t.nvlink_cliques() == []


def test_pcie_4gpu():
    t = load_preset("pcie-4gpu")
    assert t.gpu_count == 4 and t.link(0, 1) == Link("PIX") and t.link(1, 2) == Link("PHB")


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(UnknownPreset, match="known presets: .*dgx1-v100"):
        load_preset("dgx-9000")


GOOD = """\
name: tiny
description: two GPUs
gpus: 2
links:
  - [X, NV2]
  - [NV2, X]
"""


def test_minimal_preset_file(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(GOOD)
    t = load_preset_file(path)
    assert t.link(0, 1) == nvlink(2) and t.affinity[0].cpus is None


@pytest.mark.parametrize("change, field, expected", [
    (("[NV2, X]", "[NV3, X]"), "links", "a symmetric matrix"),
    (("[X, NV2]", "[X, QPI]"), "links[0][1]", "a link label"),
    (("[X, NV2]", "[NV2, NV2]"), "links[0][0]", "X (a GPU meets itself"),
    (("[X, NV2]", "[X]"), "links[0]", "a list of 2 link labels"),
    (("gpus: 2", "gpus: 3"), "links", "a list of 3 rows"),
    (("gpus: 2", "gpus: two"), "gpus", "an integer"),
    (("name: tiny", "name: tiny\ncolour: green"), "colour", "no such field"),
    (("links:", "nics:\n  mlx5_0: [PIX]\nlinks:"), "nics.mlx5_0", "a list of 2 link labels"),
    (("links:", "affinity:\n  - {cpus: 0-3}\nlinks:"), "affinity", "a list of 2 entries"),
])
def test_bad_preset_names_file_field_and_expectation(tmp_path, change, field, expected):
    path = tmp_path / "tiny.yaml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(ConfigError) as info:
        load_preset_file(path)
    assert str(info.value).startswith(f"{path}: {field}: expected")
    assert expected in str(info.value)
