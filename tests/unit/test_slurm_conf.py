"""The local Slurm cluster's configuration, written from a gangmaster cluster file, and
how racks, labels, topology presets and exact GPUs are written as Slurm features and GRES."""
from __future__ import annotations


from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gangmaster.conf.fields import ConfigError
from gangmaster.conf.limits import LOCAL_SLURM_MAX_NODES
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
from gangmaster.tools.slurm.local_cluster import (UNIX_SOCKET_PATH_MAX, Ports, check_socket_room, check_specs,
                                                  gres_conf, loopback_address, slurm_conf)
from gangmaster.tools.slurm.names import (DEFAULT_RACK, features_of, per_gpu_type, read_domains, read_features,
                                          split_per_gpu_type)
from gangmaster.tools.slurm.values import GresEntry


def lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_one_node_line_per_host_each_gpu_its_own_gres_type(tmp_path):
    specs = load_cluster_specs(default_cluster_path())
    conf = slurm_conf(specs, tmp_path, Ports(6900, 17500), host="box", address="127.0.0.1")
    nodes = lines(conf, "NodeName=")
    assert len(nodes) == len(specs) == 12
    dgx = next(line for line in nodes if line.startswith("NodeName=dgx1-000 "))
    assert "NodeHostname=box NodeAddr=127.0.0.1 Port=17500" in dgx   # the first node of the file
    assert "CPUs=80 RealMemory=491520" in dgx
    assert "Gres=" + ",".join(f"gpu:V100_{g}:1" for g in range(8)) in dgx
    assert "Feature=rack.rack-a,topo.dgx1-v100,nvlink" in dgx
    cpu = next(line for line in nodes if line.startswith("NodeName=cpu-000 "))
    assert "Gres=" not in cpu and "Port=17508" in cpu   # the ninth

    assert "SlurmctldHost=box(127.0.0.1)" in conf and "SlurmctldPort=6900" in conf
    assert f"SlurmdSpoolDir={tmp_path.resolve()}/spool/%n" in conf
    gres = gres_conf(specs, tmp_path)
    assert f"NodeName=pcie4-003 Name=gpu Type=T4_3 File={tmp_path.resolve()}/dev/nvidia3" in gres
    assert len(lines(gres, "NodeName=")) == 4 * 8 + 4 * 4


@pytest.mark.parametrize("address, reach, bound", [
    ("127.0.0.1", "127.0.0.1", True),     # the daemons listen there only
    (None, "127.0.0.1", False),           # the name is not loopback: every interface, said in a WARNING
])
def test_the_daemons_are_bound_to_the_loopback_address_of_the_machines_name(tmp_path, address, reach, bound):
    conf = slurm_conf([NodeSpec("n0", memory_mb=1024, vcores=2)], tmp_path, Ports(6900, 17500), host="box",
                      address=address)
    assert f"SlurmctldHost=box({reach})" in conf
    assert lines(conf, "NodeName=n0 ")[0].startswith(f"NodeName=n0 NodeHostname=box NodeAddr={reach} ")
    assert ("CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in lines(conf, "Communication")) == bound
    assert bool(lines(conf, "# WARNING: box does not resolve to 127.0.0.1")) != bound


@pytest.mark.parametrize("name, address", [
    ("localhost", "127.0.0.1"),
    ("127.0.1.1", None),                        # loopback, but reached from 127.0.0.1: srun never called back
    ("192.0.2.7", None),                        # resolves, but other machines reach it
    ("no-such-host.invalid", None),             # does not resolve
])
def test_loopback_address_of_a_name(name, address):
    assert loopback_address(name) == address


@pytest.mark.parametrize("spare", [0, -1])
def test_a_work_folder_too_deep_for_slurmstepds_sockets_is_refused(spare):
    """A step socket is WORK/spool/NODE/NODE_JOBID.STEPID; past 107 characters slurmstepd cannot
    make it and every job on the node is requeued at launch (seen under pytest-xdist's deep
    tmp_path): the folder is refused, naming the longest socket and how much shorter to go."""
    specs = [NodeSpec(host="cpu-000", vcores=4, memory_mb=4096), NodeSpec(host="node-long-name", vcores=4, memory_mb=4096)]
    socket_tail = len("/spool/node-long-name/node-long-name_67108863.4294967291")
    depth = UNIX_SOCKET_PATH_MAX - socket_tail + (1 if spare < 0 else 0)
    work = Path("/" + "w" * (depth - 1))     # only its length counts: nothing is made
    assert len(str(work)) == depth
    if spare < 0:
        with pytest.raises(ConfigError, match=r"--work-dir: expected a folder .* \(at most 107 characters: .*"
                                              r"node-long-name_67108863\.4294967291 has 108\); choose a folder 1 "
                                              r"characters shorter"):
            check_socket_room(specs, work)
    else:
        check_socket_room(specs, work)


def test_too_many_nodes_for_one_machine_are_refused():
    specs = [NodeSpec(f"n{i}", memory_mb=1, vcores=1) for i in range(LOCAL_SLURM_MAX_NODES + 1)]
    with pytest.raises(ConfigError, match="LOCAL_SLURM_MAX_NODES"):
        check_specs(specs, "big.yaml")


names = st.text(st.sampled_from("abcxyz0123-_"), min_size=1, max_size=12)


@settings(max_examples=60)
@given(rack=names, labels=st.frozensets(names.filter(lambda n: not n.startswith(("rack.", "topo."))), max_size=4),
       topology=st.none() | names, domains=st.lists(st.tuples(names, names), max_size=3).map(tuple))
def test_features_read_back_as_written(rack, labels, topology, domains):
    features = features_of(rack, labels, topology, domains)
    assert read_features(features) == (rack, labels, topology)
    assert read_domains(features) == domains


def test_a_node_without_rack_features_is_in_the_default_rack():
    assert read_features(["nvlink"]) == (DEFAULT_RACK, frozenset({"nvlink"}), None)


@settings(max_examples=60)
@given(gpu_type=st.none() | st.text(st.sampled_from("AVabt0123_"), min_size=1, max_size=8),
       index=st.integers(0, 63))
def test_per_gpu_types_read_back_as_written(gpu_type, index):
    written = per_gpu_type(gpu_type, index)
    assert split_per_gpu_type(written) == (gpu_type or "gpu", index)
    assert GresEntry.parse(f"gpu:{written}:1").type == written
