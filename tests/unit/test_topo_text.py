"""Reading `nvidia-smi topo -m` text: real outputs, their variants, and malformed ones."""
from pathlib import Path

import pytest

from gangmaster.gpu_topology.links import Link, LinkError, nvlink, pair_score, parse_link
from gangmaster.gpu_topology.topo_text import TopoFormatError, parse_topo_text, read_topo_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topo"
V100 = FIXTURES / "topo_dgx1_v100.txt"


@pytest.mark.parametrize("label, link", [
    ("NV1", nvlink(1)), ("NV2", nvlink(2)), ("NV12", nvlink(12)), ("NV18", nvlink(18)),
    ("PIX", Link("PIX")), ("PXB", Link("PXB")), ("PHB", Link("PHB")), ("NODE", Link("NODE")),
    ("SYS", Link("SYS")), ("SOC", Link("SYS")), ("BOARD", Link("BOARD")), ("nv4", nvlink(4)),
])
def test_link_labels(label, link):
    assert parse_link(label) == link


@pytest.mark.parametrize("label", ["NV", "NV0", "NV123", "QPI", "", "X", "NVB"])
def test_bad_link_labels(label):
    with pytest.raises(LinkError, match="expected NV1..NV18"):
        parse_link(label)


def test_score_order_nvlink_dominates_then_pcie_ladder():
    ladder = ["NV18", "NV12", "NV2", "NV1", "BOARD", "PIX", "PXB", "PHB", "NODE", "SYS"]
    scores = [pair_score(parse_link(label)) for label in ladder]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert pair_score(parse_link("SOC")) == pair_score(parse_link("SYS"))


def test_dgx1_v100_tabs_nics_cpu_affinity():
    t = read_topo_file(V100)
    assert t.gpu_count == 8 and t.name == "topo_dgx1_v100"
    assert [t.link(0, j).label for j in range(1, 8)] == ["NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    assert t.link(7, 6) == nvlink(2) and t.link(1, 5) == nvlink(2)
    assert sorted(t.nics) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert t.nic_link("mlx5_2", 4) == Link("PIX") and t.nic_link("mlx5_2", 0) == Link("SYS")
    assert t.affinity[0].cpus == "0-19,40-59" and t.affinity[7].cpus == "20-39,60-79"
    assert t.affinity[0].numa is None
    assert t.nvlink_cliques()[:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_dgx_a100_nv12_twelve_nics_numa_affinity():
    t = read_topo_file(FIXTURES / "topo_dgx_a100.txt")
    assert {t.link(i, j) for i in range(8) for j in range(8) if i != j} == {nvlink(12)}
    assert len(t.nics) == 12 and t.nic_link("mlx5_11", 0) == Link("SYS")
    assert t.affinity[0].numa == "3" and t.affinity[6].cpus == "80-95,208-223"
    assert t.nvlink_cliques() == [list(range(8))]


def test_h200_driver_580_underlined_header_one_gpu():
    """Taken on a lent H200 (driver 580.159.04, `nvidia-smi topo -m > file`): the header
    comes wrapped in terminal underline escapes, and the row has an empty cell before
    GPU NUMA ID's N/A."""
    text = (FIXTURES / "topo_h200_1gpu_driver580.txt").read_text()
    assert "\x1b[4m" in text and "\x1b[0m" in text
    t = parse_topo_text(text)
    assert t.gpu_count == 1 and t.nics == []
    assert t.affinity[0].cpus == "0-15" and t.affinity[0].numa == "0"


def test_pcie_only_matrix():
    t = read_topo_file(FIXTURES / "topo_dgx1_pcie_only_mp.txt")
    assert t.link(0, 1) == Link("PIX") and t.link(0, 2) == Link("PHB") and t.link(3, 4) == Link("SYS")
    assert t.nvlink_cliques() == [] and t.affinity[5].numa == "1"


def test_spaces_instead_of_tabs():
    t = read_topo_file(FIXTURES / "topo_k80_4gpu_hived.txt")
    assert t.gpu_count == 4 and t.nics == []
    assert {t.link(i, j) for i in range(4) for j in range(4) if i != j} == {Link("NODE")}
    assert t.affinity[3].cpus == "0-11"


def test_tabs_and_spaces_read_alike():
    text = V100.read_text()
    spaced = "\n".join(line.replace("\t", "   ") for line in text.splitlines())
    a, b = parse_topo_text(text), parse_topo_text(spaced)
    assert a.label_matrix() == b.label_matrix() and a.affinity == b.affinity
    assert {n: [a.nic_link(n, i) for i in range(8)] for n in a.nics} == \
           {n: [b.nic_link(n, i) for i in range(8)] for n in b.nics}


OLD_DRIVER = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity
GPU0\t X \tNV18\tSOC\tSOC\t0-11
GPU1\tNV18\t X \tSOC\tSOC\t0-11
GPU2\tSOC\tSOC\t X \tPXB\t12-23
GPU3\tSOC\tSOC\tPXB\t X \t12-23

Legend:

  X   = Self
  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe switches (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing a single PCIe switch
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def test_old_legend_soc_and_two_digit_nvlink():
    t = parse_topo_text(OLD_DRIVER)
    assert t.link(0, 1) == nvlink(18) and t.link(0, 2) == Link("SYS") and t.link(2, 3) == Link("PXB")


NIC_LEGEND = """\
\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV4\tPXB\tSYS\t0-15\t0\t\tN/A
GPU1\tNV4\t X \tSYS\tPXB\t16-31\t1\t\tN/A
NIC0\tPXB\tSYS\t X \tSYS
NIC1\tSYS\tPXB\tSYS\t X

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
"""


def test_nic_legend_names_the_nic_columns_and_three_affinity_columns():
    t = parse_topo_text(NIC_LEGEND)
    assert sorted(t.nics) == ["mlx5_0", "mlx5_1"]
    assert t.nic_link("mlx5_1", 1) == Link("PXB")
    assert t.affinity[1].cpus == "16-31" and t.affinity[1].numa == "1"


def _broken(line_no: int, new_line: str) -> str:
    lines = V100.read_text().splitlines()
    lines[line_no - 1] = new_line
    return "\n".join(lines)


@pytest.mark.parametrize("text, line, expected", [
    ("", 1, "a header line listing GPU0"),
    ("\tmlx5_0\tmlx5_1\n", 1, "a header line listing GPU0"),
    ("\tGPU1\tGPU0\n", 1, "GPU0 as column 1"),
    ("\tGPU0\tGPU1\tCPU Affinity\tBogus\n", 1, "affinity headings"),
    (_broken(3, "GPU1\tNV1\t X \tNV2\tNV1\tSYS\tNV2\tSYS\tSYS\tPIX\tSYS\tPHB"), 3, "12 link cells in the row of GPU1"),
    (_broken(3, "GPU1\tNV1\t X \tNV7\tNV1\tSYS\tNV2\tSYS\tSYS\tPIX\tSYS\tPHB\tSYS\t0-19,40-59"), 4,
     "GPU2-GPU1 to match GPU1-GPU2 on line 3 (NV7)"),
    (_broken(4, "GPU2\tNV1\tNV2\t X \tNV2\tSYS\tQPI\tNV1\tSYS\tPHB\tSYS\tPIX\tSYS\t0-19"), 4,
     "a link (NV1..NV18 (NV<k>), BOARD, PIX, PXB, PHB, NODE, SYS or SOC) in column GPU5 of the row of GPU2"),
    (_broken(4, "GPU2\tNV1\tNV2\tNV2\tNV2\tSYS\tSYS\tNV1\tSYS\tPHB\tSYS\tPIX\tSYS\t0-19"), 4, "X where GPU2 meets itself"),
    (_broken(5, "GPU4\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tSYS\tNV1\tPHB\tSYS\tPIX\tSYS\t0-19"), 5, "the row of GPU3"),
    (_broken(5, "GPU3\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tSYS\tNV1\tPHB\tSYS\tPIX\tSYS\t0-19\t0\t7"), 5,
     "at most 1 affinity value(s)"),
    (_broken(10, ""), 10, "the row of mlx5_0"),
    ("\n".join(V100.read_text().splitlines()[:6]), 7, "the row of GPU5"),
])
def test_malformed_matrix_names_line_and_expectation(text, line, expected):
    with pytest.raises(TopoFormatError) as info:
        parse_topo_text(text, source="bad.txt")
    assert info.value.line == line
    assert expected in str(info.value)
    assert str(info.value).startswith(f"bad.txt: line {line}: expected")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TopoFormatError, match="an existing file"):
        read_topo_file(tmp_path / "nope.txt")
