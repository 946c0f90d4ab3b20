"""The NVML reader, against fake machines built by patching the pynvml functions it
calls; and one test against real hardware that runs only where a driver answers
(``python -m pytest -m nvml``)."""
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

import pynvml
import pytest

from gangmaster.gpu_topology.links import Link, nvlink
from gangmaster.gpu_topology.nvml_reader import NvmlUnavailable, cpu_ranges, nvml_or_preset, read_nvml
from gangmaster.gpu_topology.presets import load_preset
from gangmaster.gpu_topology.topo_text import parse_topo_text

LEVEL = {"BOARD": 0, "PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}


@dataclass
class FakeMachine:
    """GPUs with PCI addresses, PCIe levels per pair and NVLinks per GPU:
    ``links[i]`` lists (remote bus id, remote device type) per active link."""

    levels: list[list[int]]
    links: list[list[tuple[str, int]]]
    remote_type_supported: bool = True
    init_error: int | None = None
    affinity_words: list[int] = field(default_factory=lambda: [0xF])
    # NUMA node per GPU handle, as the memory affinity ("NUMA Affinity") and as the GPU's
    # own node ("GPU NUMA ID", Grace-style machines); None: the query answers Not Supported
    memory_numa: Callable[[int], int] | None = lambda h: h // 4
    gpu_numa_id: Callable[[int], int] | None = None
    calls: list[str] = field(default_factory=list)

    @property
    def bus(self):
        return [f"00000000:{0x10 + i:02X}:00.0" for i in range(len(self.levels))]

    def install(self, monkeypatch):
        def err(code):
            return pynvml.NVMLError(code)

        def init():
            self.calls.append("init")
            if self.init_error is not None:
                raise err(self.init_error)

        class Pci:
            def __init__(self, bus_id):
                self.busId = bus_id.encode()

        def state(h, link):
            if link >= len(self.links[h]):
                raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT if link > 17 else pynvml.NVML_ERROR_NOT_SUPPORTED)
            return pynvml.NVML_FEATURE_ENABLED

        def remote_type(h, link):
            if not self.remote_type_supported:
                raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return self.links[h][link][1]

        def memory_affinity(h, words, scope):
            assert scope == pynvml.NVML_AFFINITY_SCOPE_NODE
            if self.memory_numa is None:
                raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return [1 << self.memory_numa(h)]

        def gpu_numa_id(h):
            if self.gpu_numa_id is None:
                raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return self.gpu_numa_id(h)

        patches = {
            "nvmlInit": init,
            "nvmlShutdown": lambda: self.calls.append("shutdown"),
            "nvmlDeviceGetCount": lambda: len(self.levels),
            "nvmlDeviceGetHandleByIndex": lambda i: i,
            "nvmlDeviceGetPciInfo": lambda h: Pci(self.bus[h]),
            "nvmlDeviceGetTopologyCommonAncestor": lambda a, b: self.levels[a][b],
            "nvmlDeviceGetNvLinkState": state,
            "nvmlDeviceGetNvLinkRemotePciInfo": lambda h, link: Pci(self.links[h][link][0]),
            "nvmlDeviceGetNvLinkRemoteDeviceType": remote_type,
            "nvmlDeviceGetCpuAffinity": lambda h, words: self.affinity_words,
            "nvmlDeviceGetMemoryAffinity": memory_affinity,
            "nvmlDeviceGetNumaNodeId": gpu_numa_id,
        }
        for name, fn in patches.items():
            monkeypatch.setattr(pynvml, name, fn)
        return self


def machine_like(preset: str) -> FakeMachine:
    """A fake machine wired as the preset says: NV<k> pairs get k peer links."""
    t = load_preset(preset)
    g = t.gpu_count
    levels = [[0 if i == j else LEVEL[t.link(i, j).kind] if not t.link(i, j).is_nvlink else 50
               for j in range(g)] for i in range(g)]
    m = FakeMachine(levels, [[] for _ in range(g)])
    for i in range(g):
        for j in range(g):
            if i != j and t.link(i, j).is_nvlink:
                m.links[i] += [(m.bus[j], 0)] * t.link(i, j).nvlinks
    return m


def test_dgx1_nvlink_peers_and_pcie_levels(monkeypatch):
    machine = machine_like("dgx1-v100").install(monkeypatch)
    t = read_nvml()
    assert t.label_matrix() == load_preset("dgx1-v100").label_matrix()
    assert machine.calls == ["init", "shutdown"]


def test_pcie_levels_map_to_path_kinds(monkeypatch):
    machine_like("k80-8gpu").install(monkeypatch)
    t = read_nvml()
    assert t.link(0, 1) == Link("BOARD") and t.link(0, 2) == Link("PXB") and t.link(0, 4) == Link("SYS")
    assert t.nvlink_cliques() == []


def nvswitch_machine(gpus=8, links_per_gpu=12, switches=6, remote_type_supported=True) -> FakeMachine:
    levels = [[0 if i == j else (20 if i // 2 == j // 2 else 50) for j in range(gpus)] for i in range(gpus)]
    switch_bus = [f"00000000:{0xC0 + s:02X}:00.0" for s in range(switches)]
    links = [[(switch_bus[k % switches], pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH) for k in range(links_per_gpu)]
             for _ in range(gpus)]
    return FakeMachine(levels, links, remote_type_supported=remote_type_supported)


@pytest.mark.parametrize("remote_type_supported", [True, False])
def test_nvswitch_far_end_is_a_switch_every_pair_nv12(monkeypatch, remote_type_supported):
    nvswitch_machine(remote_type_supported=remote_type_supported).install(monkeypatch)
    t = read_nvml()
    assert {t.link(i, j) for i in range(8) for j in range(8) if i != j} == {nvlink(12)}


def test_gpu_with_fewer_switch_links_bounds_the_pair(monkeypatch):
    machine = nvswitch_machine(gpus=3)
    machine.links[2] = machine.links[2][:4]
    machine.install(monkeypatch)
    t = read_nvml()
    assert t.link(0, 1) == nvlink(12) and t.link(0, 2) == nvlink(4)


def test_affinity_from_nvml(monkeypatch):
    machine = machine_like("pcie-4gpu")
    machine.affinity_words = [0xFFFFF | (0xFFFFF << 40)]
    machine.install(monkeypatch)
    t = read_nvml()
    assert t.affinity[0].cpus == "0-19,40-59" and t.affinity[3].numa == "0"


def test_numa_is_the_memory_affinity_and_the_gpus_own_node_only_without_it(monkeypatch):
    """nvidia-smi's "NUMA Affinity" is NVML's memory affinity; nvmlDeviceGetNumaNodeId is
    the GPU's own node ("GPU NUMA ID"), read only where the memory affinity is missing."""
    machine = machine_like("pcie-4gpu")
    machine.memory_numa = lambda h: 1 + h // 2
    machine.gpu_numa_id = lambda h: 8 + h
    machine.install(monkeypatch)
    assert [a.numa for a in read_nvml().affinity] == ["1", "1", "2", "2"]
    machine.memory_numa = None
    assert [a.numa for a in read_nvml().affinity] == ["8", "9", "10", "11"]


def test_one_gpu_that_answers_not_supported_to_every_nvlink_and_numa_query(monkeypatch):
    """What a lent H200 answered (driver 580.159.04, in a VM, 16 CPUs): each of the 36
    NVLink queries and nvmlDeviceGetNumaNodeId say Not Supported; the CPU affinity is
    0xFFFF and the memory affinity node 0, which `nvidia-smi topo -m` prints as 0-15 / 0."""
    machine = FakeMachine([[0]], [[]], affinity_words=[0xFFFF], memory_numa=lambda h: 0, gpu_numa_id=None)
    machine.install(monkeypatch)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetNvLinkState",
                        lambda h, link: (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)))
    t = read_nvml()
    assert t.gpu_count == 1 and t.nvlink_cliques() == []
    assert t.affinity[0].cpus == "0-15" and t.affinity[0].numa == "0"


def test_no_driver_is_a_clear_message_and_falls_back_to_the_preset(monkeypatch):
    machine = machine_like("pcie-4gpu")
    machine.init_error = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    machine.install(monkeypatch)
    with pytest.raises(NvmlUnavailable, match="NVML unavailable: .*NVIDIA driver"):
        read_nvml()
    topology, note = nvml_or_preset("dgx1-v100")
    assert topology is load_preset("dgx1-v100")
    assert "NVML unavailable" in note and "'dgx1-v100'" in note
    with pytest.raises(NvmlUnavailable):
        nvml_or_preset(None)


def test_unknown_level_is_reported_and_nvml_is_shut_down(monkeypatch):
    machine = machine_like("pcie-4gpu")
    machine.levels[0][1] = machine.levels[1][0] = 35
    machine.install(monkeypatch)
    with pytest.raises(NvmlUnavailable, match="unknown topology level 35 for GPU0-GPU1"):
        read_nvml()
    assert machine.calls[-1] == "shutdown"


def test_no_gpus(monkeypatch):
    FakeMachine([], []).install(monkeypatch)
    with pytest.raises(NvmlUnavailable, match="no GPUs"):
        read_nvml()


@pytest.mark.parametrize("words, text", [([0], ""), ([1], "0"), ([0b1011], "0-1,3"),
                                         ([1 << 63, 1], "63-64"), ([0, 0xF0], "68-71")])
def test_cpu_ranges(words, text):
    assert cpu_ranges(words) == text


def _real_nvml_or_skip():
    try:
        return read_nvml()
    except NvmlUnavailable as exc:
        pytest.skip(f"no NVIDIA driver answers here ({exc}); run on a GPU machine with "
                    "`python -m pytest -m nvml`")


@pytest.mark.nvml
def test_reader_on_real_hardware():
    """Run on a GPU machine: the reader agrees with the driver's own `nvidia-smi topo -m`."""
    topology = _real_nvml_or_skip()
    pynvml.nvmlInit()
    try:
        assert topology.gpu_count == pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    g = topology.gpu_count
    assert all(topology.link(i, j) == topology.link(j, i) for i in range(g) for j in range(g) if i != j)
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not on PATH: checked the GPU count and symmetry only")
    text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    smi = parse_topo_text(text, source="nvidia-smi topo -m")
    assert smi.gpu_count == g
    # nvidia-smi prints an on-board pair (NVML "internal") as PIX
    same = {(a, b) for a in ("BOARD", "PIX") for b in ("BOARD", "PIX")}
    for i in range(g):
        for j in range(i + 1, g):
            ours, theirs = topology.link(i, j), smi.link(i, j)
            assert ours == theirs or (ours.kind, theirs.kind) in same, (i, j, ours, theirs)
    for i in range(g):
        ours, theirs = topology.affinity[i], smi.affinity[i]
        assert ours.cpus == theirs.cpus and ours.numa == theirs.numa, (i, ours, theirs)
