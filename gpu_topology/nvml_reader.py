"""Reading this machine's GPU topology from the driver, through NVML (``nvidia-ml-py``,
``import pynvml``).

Per GPU pair, NVML's *common ancestor* level gives the PCIe path (internal/same
board, single switch, multiple switches, host bridge, NUMA node, system). NVLink
comes per link: ``nvmlDeviceGetNvLinkState`` says whether link ``l`` of a GPU is
up and ``nvmlDeviceGetNvLinkRemotePciInfo`` whose PCI address is at its far end.
When that address is another GPU the two are peers (one more bonded link); on
NVSwitch systems (DGX-2, DGX A100/H100) the far end is a switch. The switches of
one machine form one fabric (a DGX-2 trunks its two baseboards' switches), so every
two GPUs with switch links talk over ``min(their switch links)`` NVLinks, which is
what ``nvidia-smi topo -m`` prints (NV12 on a DGX A100, NV6 on a DGX-2). NVLink, where present, is the
pair's link; the PCIe path is kept otherwise.

Affinity is what ``topo -m`` prints as "CPU Affinity" and "NUMA Affinity": the CPUs and
the NUMA nodes whose memory is closest (``nvmlDeviceGetMemoryAffinity``).
``nvmlDeviceGetNumaNodeId`` is something else, the GPU's *own* NUMA node on machines
whose GPU memory is one ("GPU NUMA ID"); it is read only where the memory affinity is
not. On a real H200 (driver 580, in a VM) every NVLink query answers Not Supported and
so does the GPU's NUMA id, while the memory affinity says node 0, as ``topo -m`` does.

No driver (or no pynvml) raises :class:`NvmlUnavailable` with a message that says
so; :func:`nvml_or_preset` then falls back to the configured preset.
"""
from __future__ import annotations

import os
from typing import Any

from .links import Link, nvlink
from .model import GpuAffinity, Topology

# NVML_TOPOLOGY_* levels (nvml.h) -> PCIe path kinds
LEVEL_KIND = {0: "BOARD", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_NVLINK_DEVICE_TYPE_GPU = 0x00
_NVLINK_DEVICE_TYPE_SWITCH = 0x02


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here (no pynvml, no driver, no GPU); the message says which."""


def read_nvml(name: str = "nvml") -> Topology:
    """This machine's topology as NVML reports it. Raises :class:`NvmlUnavailable`."""
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("NVML unavailable: the nvidia-ml-py package (import pynvml) is not "
                              "installed") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML unavailable: {exc} (is the NVIDIA driver installed and "
                              "loaded on this machine?)") from None
    try:
        return _read(pynvml, name)
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML failed while reading the topology: {exc}") from None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def nvml_or_preset(fallback_preset: str | None) -> tuple[Topology, str | None]:
    """NVML's topology, or, when NVML is unavailable, the fallback preset.

    Returns the topology and a note (None when NVML answered) saying why the
    preset is shown; without a fallback the :class:`NvmlUnavailable` propagates."""
    from .presets import load_preset

    try:
        return read_nvml(), None
    except NvmlUnavailable as exc:
        if not fallback_preset:
            raise
        return load_preset(fallback_preset), f"{exc}; using the configured preset {fallback_preset!r}"


def _read(pynvml: Any, name: str) -> Topology:
    count = pynvml.nvmlDeviceGetCount()
    if count < 1:
        raise NvmlUnavailable("NVML answered but reports no GPUs on this machine")
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    bus = [_bus_key(pynvml.nvmlDeviceGetPciInfo(h).busId) for h in handles]
    gpu_at = {b: i for i, b in enumerate(bus)}

    peer_links = [[0] * count for _ in range(count)]
    switch_links = [0] * count
    for i, handle in enumerate(handles):
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                if pynvml.nvmlDeviceGetNvLinkState(handle, link) != pynvml.NVML_FEATURE_ENABLED:
                    continue
                remote = _bus_key(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
            except pynvml.NVMLError:
                continue  # no such link on this GPU, or NVLink not supported at all
            kind = _remote_type(pynvml, handle, link, remote in gpu_at)
            if kind == _NVLINK_DEVICE_TYPE_GPU and remote in gpu_at:
                peer_links[i][gpu_at[remote]] += 1
            elif kind == _NVLINK_DEVICE_TYPE_SWITCH:
                switch_links[i] += 1

    links: list[list[Link | None]] = [[None] * count for _ in range(count)]
    for i in range(count):
        for j in range(i + 1, count):
            direct = max(peer_links[i][j], peer_links[j][i])
            via_switch = min(switch_links[i], switch_links[j])
            if direct or via_switch:
                link = nvlink(direct or via_switch)
            else:
                level = pynvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
                if level not in LEVEL_KIND:
                    raise NvmlUnavailable(f"NVML reported an unknown topology level {level} for "
                                          f"GPU{i}-GPU{j}; expected one of {sorted(LEVEL_KIND)}")
                link = Link(LEVEL_KIND[level])
            links[i][j] = links[j][i] = link
    affinity = [_affinity(pynvml, h) for h in handles]
    return Topology(name, links, affinity=affinity, source="NVML",
                    description=f"{count} GPU(s) as NVML reports them on this machine")


def _remote_type(pynvml: Any, handle: Any, link: int, is_local_gpu: bool) -> int:
    """GPU or switch at the far end of a link. Drivers that cannot say are answered
    from the address: one of our GPUs, else a switch."""
    try:
        return int(pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link))
    except (pynvml.NVMLError, AttributeError):
        return _NVLINK_DEVICE_TYPE_GPU if is_local_gpu else _NVLINK_DEVICE_TYPE_SWITCH


def _bus_key(bus_id: bytes | str) -> tuple[int, int, int, int]:
    """``"00000000:07:00.0"`` (or the legacy ``"0000:07:00.0"``) → (domain, bus, device, function)."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    text = text.strip().strip("\x00").lower()
    try:
        domain, bus, rest = text.split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        raise NvmlUnavailable(f"NVML returned an unreadable PCI bus id {text!r}; "
                              "expected DDDDDDDD:BB:DD.F") from None


_NUMA_NODE_WORDS = 16  # up to 1,024 NUMA nodes


def _affinity(pynvml: Any, handle: Any) -> GpuAffinity:
    cpus = numa = None
    words = max(1, ((os.cpu_count() or 64) + 63) // 64)
    try:
        cpus = cpu_ranges(list(pynvml.nvmlDeviceGetCpuAffinity(handle, words))) or None
    except (pynvml.NVMLError, AttributeError):
        pass
    try:
        numa = cpu_ranges(list(pynvml.nvmlDeviceGetMemoryAffinity(
            handle, _NUMA_NODE_WORDS, pynvml.NVML_AFFINITY_SCOPE_NODE))) or None
    except (pynvml.NVMLError, AttributeError):
        pass
    if numa is None:
        try:
            numa = str(pynvml.nvmlDeviceGetNumaNodeId(handle))
        except (pynvml.NVMLError, AttributeError):
            pass
    return GpuAffinity(cpus=cpus, numa=numa)


def cpu_ranges(words: list[int]) -> str:
    """64-bit set words → ``"0-19,40-59"`` (the ``topo -m`` spelling of CPU and NUMA node sets)."""
    cpus = [64 * w + b for w, word in enumerate(words) for b in range(64) if int(word) >> b & 1]
    ranges: list[str] = []
    start = prev = None
    for cpu in cpus + [None]:
        if start is not None and (cpu is None or cpu != prev + 1):
            ranges.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = None
        if cpu is not None and start is None:
            start = cpu
        prev = cpu
    return ",".join(ranges)
