"""Slurm's topology.conf read into a Slurm snapshot's network domains (tools/snapshots/slurm_topology.py):
the switches of the shipped fixture become each node's leaf, spine and core, `gangmaster diagnose
--topology-conf` places a networkDomain gang by them, and every line Slurm would refuse is refused
naming the file, the line and the key."""
from __future__ import annotations

from pathlib import Path

import pytest

from gangmaster.tools.cli import main
from gangmaster.tools.snapshots import SnapshotError, load_snapshot
from gangmaster.tools.snapshots.slurm_topology import level_name, read_topology

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
SLURM_24 = [FIX / "slurm-24.05-scontrol-nodes.json", FIX / "slurm-24.05-squeue.json"]
TOPOLOGY = FIX / "slurm-24.05-topology.conf"
K8S_NODES = FIX / "k8s-priority-nodes.json"

LEAF_PAIR = """\
protocolVersion: 2
name: leaf-pair
type: job
taskRoles:
  worker:
    instances: 2
    resourcePerInstance: {cpu: 4, memoryMB: 16384, gpu: 4}
    commands: ["python train.py"]
gangmaster:
  networkDomain: {required: leaf}
"""


def test_the_switches_are_the_nodes_domains_innermost_first():
    snap = load_snapshot(SLURM_24, topology_conf=TOPOLOGY)
    above = (("spine", "spine1"), ("core", "core0"))
    assert {s.host: s.domains for s in snap.specs} == {
        "a100-01": (("leaf", "leaf3"), *above), "a100-02": (("leaf", "leaf3"), *above),
        "a100-03": (("leaf", "leaf4"), *above), "a100-04": (("leaf", "leaf4"), *above),
        "cpu-01": (("leaf", "leaf4"), *above)}
    assert TOPOLOGY in snap.sources and not snap.notes
    assert [level_name(h) for h in range(5)] == ["leaf", "spine", "core", "level3", "level4"]


@pytest.mark.parametrize("topology, code, said", [
    ([], 1, "network-domain-too-small: no single leaf has room for 2 × 4 GPUs (the cluster describes no leaf)"),
    (["--topology-conf", str(TOPOLOGY)], 0, "can start now"),
], ids=["without: no leaf known", "with: two leaves of two A100 nodes"])
def test_diagnose_places_a_required_leaf_gang_by_topology_conf(topology, code, said, tmp_path, capsys):
    job = tmp_path / "leaf-pair.yaml"
    job.write_text(LEAF_PAIR)
    assert main(["diagnose", str(job), "--snapshot", *map(str, SLURM_24), *topology]) == code
    assert said in capsys.readouterr().out


def test_nodes_the_two_do_not_share_are_noted(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s1 Nodes=a100-[01-02],gone-01\n")
    notes = load_snapshot(SLURM_24, topology_conf=conf).notes
    assert f"3 node(s) under no switch of {conf}: in no network domain of its levels: a100-03, a100-04, " \
           "cpu-01" in notes
    assert f"1 node(s) of {conf} are not in the snapshot: gone-01" in notes


#: topology.conf -> what the error says after "FILE: "
BAD_FILES = {
    "unknown key": ("SwitchName=s1 Nodes=a Speed=1\n",
                    "line 1: Speed: expected one of Switches, Nodes, LinkSpeed on a SwitchName line, got \"Speed\""),
    "not a switch line": ("# the leaves\nNodeName=a\n",
                          "line 2: NodeName: expected a line that starts with SwitchName= or BlockName=, "
                          "got \"NodeName\""),
    "not key=value": ("SwitchName=s1 Nodes a\n",
                      "line 1: expected KEY=VALUE pairs separated by spaces (SwitchName=s1 Nodes=dgx[01-04]), "
                      "got \"SwitchName=s1 Nodes a\""),
    "a switch twice": ("SwitchName=s1 Nodes=a\nSwitchName=s1 Nodes=b\n",
                       "line 2: SwitchName: expected each SwitchName once (also on line 1), got \"s1\""),
    "a child named nowhere": ("SwitchName=s1 Nodes=a\nSwitchName=top Switches=s[1-2]\n",
                              "line 2: Switches: expected switches named on their own SwitchName line, got \"s2\""),
    "a node under two switches": ("SwitchName=s1 Nodes=a[1-2]\nSwitchName=s2 Nodes=a2\n",
                                  "line 2: Nodes: expected each node under one SwitchName (a2 is under s1 too), "
                                  "got \"a2\""),
    "a loop": ("SwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s1\n",
               "line 1: Switches: expected switches that do not contain themselves, got \"s1 > s2 > s1\""),
    "a bad hostlist": ("SwitchName=s1 Nodes=a[3-1]\n",
                       "line 1: Nodes: expected a hostlist such as dgx[01-04,07], got \"a[3-1]\""),
    "trees and blocks": ("SwitchName=s1 Nodes=a\nBlockName=b1 Nodes=b\n",
                         "line 2: BlockName: expected one kind of line a file (line 1 has SwitchName: "
                         "topology/tree's SwitchName or topology/block's BlockName), got \"BlockName\""),
    "too deep": ("SwitchName=s0 Nodes=a\n" + "".join(f"SwitchName=s{k} Switches=s{k - 1}\n" for k in range(1, 17)),
                 "line 17: Switches: expected at most 16 levels of switches (MAX_DOMAIN_LEVELS in conf/limits.py), "
                 "got 17"),
}


@pytest.mark.parametrize("text, said", BAD_FILES.values(), ids=list(BAD_FILES))
def test_a_file_slurm_would_refuse_is_refused_naming_line_and_key(text, said, tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text(text)
    with pytest.raises(SnapshotError) as caught:
        read_topology(conf)
    assert str(caught.value) == f"{conf}: {said}"


def test_blocks_are_one_level(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("BlockName=b1 Nodes=a[1-2]\nBlockName=b2 Nodes=a3\nBlockSizes=2,4\n")
    assert read_topology(conf) == {"a1": (("block", "b1"),), "a2": (("block", "b1"),), "a3": (("block", "b2"),)}


@pytest.mark.parametrize("argv, said", [
    (["snapshot", str(K8S_NODES), "--topology-conf", str(TOPOLOGY)],
     f"{TOPOLOGY}: expected a topology.conf with a Slurm snapshot (it is Slurm's), got \"kubernetes files\""),
    (["diagnose", "JOB", "--topology-conf", str(TOPOLOGY)],
     "--topology-conf: expected it only with --snapshot (a Slurm snapshot's topology.conf)"),
    (["snapshot", *map(str, SLURM_24), "--topology-conf", str(FIX / "missing.conf")],
     f"{FIX / 'missing.conf'}: expected a readable topology.conf, got \"No such file or directory\""),
], ids=["not a Slurm snapshot", "diagnose without --snapshot", "no such file"])
def test_the_flag_refused_where_it_cannot_apply(argv, said, tmp_path, capsys):
    job = tmp_path / "leaf-pair.yaml"
    job.write_text(LEAF_PAIR)
    assert main([str(job) if a == "JOB" else a for a in argv]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
