import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.cluster_file import load_cluster


def write(tmp_path, text):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def test_default_cluster_is_heterogeneous_with_racks():
    view = load_cluster()
    assert len(view) == 12
    assert set(view.racks) == {"rack-a", "rack-b"}
    assert {"V100", "T4"} <= set(view.gpu_types)
    dgx = view.node("dgx1-000")
    assert dgx.capacity.gpus == 8 and dgx.topology == "dgx1-v100" and "nvlink" in dgx.labels
    assert view.node("dgx1-003").rack == "rack-b"


def test_hosts_and_rack_blocks(tmp_path):
    view = load_cluster(write(tmp_path, """
nodeGroups:
  - {name: g, count: 4, racks: [r1, r2], memoryMB: 10, vcores: 2, gpus: 2, gpuType: K80, ports: "100-109"}
  - {name: h, hosts: [alpha, beta], rack: r3, memoryMB: 10, vcores: 2}
"""))
    assert view.hosts == ["g-000", "g-001", "g-002", "g-003", "alpha", "beta"]
    assert [view.node(h).rack for h in view.hosts] == ["r1", "r1", "r2", "r2", "r3", "r3"]
    assert view.node("g-000").free.port_ranges.count == 10


@pytest.mark.parametrize("text, message", [
    ("nodeGroups:\n  - {name: g, count: 2, memoryMB: 10, vcores: 2, gpus: eight}",
     'nodeGroups[0].gpus: expected an integer within 0..64, got "eight"'),
    ("nodeGroups:\n  - {name: g, count: 0, memoryMB: 10, vcores: 2}",
     "nodeGroups[0].count: expected an integer >= 1, got 0"),
    ("nodeGroups:\n  - {name: g, count: 1, memoryMB: 10, vcores: 2, gpuz: 1}",
     "nodeGroups[0].gpuz: expected no such field here"),
    ("nodeGroups:\n  - {name: g, count: 1, memoryMB: 10, vcores: 2, ports: 9-1}",
     "nodeGroups[0].ports: expected port ranges"),
    ("nodeGroups:\n  - {name: g, count: 1, vcores: 2}",
     "nodeGroups[0].memoryMB: expected a value (the field is required)"),
    ("nodeGroups: [\n", "line"),
    ("nodeGroups:\n  - {name: g, hosts: [a, a], memoryMB: 1, vcores: 1}", "'a' appears twice"),
])
def test_bad_cluster_files_name_file_and_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_cluster(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: expected an existing file"):
        load_cluster(tmp_path / "nope.yaml")
