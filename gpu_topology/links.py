"""What joins two GPUs, and what each kind of link is worth.

This module holds THE pair-score table: every set score in gangmaster (the
``topology`` strategy, ``gangmaster topo``, the benchmark) comes from
:func:`pair_score`. Change the numbers here and nowhere else.

The order follows what a collective (all-reduce) between the two GPUs pays:

=========  =====  ==========================================================
label      score  path between the two GPUs
=========  =====  ==========================================================
``NV<k>``  100+10k  ``k`` bonded NVLinks (direct, or through an NVSwitch);
                  NV1 = 110 … NV12 = 220 … NV18 = 280
``BOARD``  60     same board (dual-GPU cards such as the K80; NVML "internal")
``PIX``    50     at most one PCIe switch
``PXB``    40     several PCIe switches, no host bridge
``PHB``    30     a PCIe host bridge (the CPU's root complex)
``NODE``   20     between host bridges within one NUMA node
``SYS``    10     across NUMA nodes / sockets (QPI/UPI); old drivers say ``SOC``
=========  =====  ==========================================================

Why these numbers: any NVLink beats any PCIe path (NV1 = 110 > BOARD = 60), more
bonded links beat fewer, and the PCIe ladder is evenly spaced so that a set's
score (the sum over its pairs, :meth:`Topology.set_score`) prefers sets whose
pairs are all one step closer. Scores are integers so that tables of them stay
exact and cheap (numpy ``int64``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

NVLINK = "NV"
PCIE_KINDS = ("BOARD", "PIX", "PXB", "PHB", "NODE", "SYS")
"""PCIe path kinds, closest first."""

PCIE_SCORE = {"BOARD": 60, "PIX": 50, "PXB": 40, "PHB": 30, "NODE": 20, "SYS": 10}
NVLINK_BASE_SCORE = 100
NVLINK_SCORE_PER_LINK = 10
MAX_NVLINKS = 99
"""``NV#`` has one or two digits in ``nvidia-smi topo -m`` (NV1..NV18 on real parts)."""

ALIASES = {"SOC": "SYS"}
"""Older drivers print ``SOC`` (socket) where newer ones print ``SYS``."""

_NV = re.compile(r"NV(\d{1,2})")


class LinkError(ValueError):
    """A link label that is not one of ``NV<k>``, BOARD, PIX, PXB, PHB, NODE, SYS, SOC."""


EXPECTED_LABELS = "NV1..NV18 (NV<k>), BOARD, PIX, PXB, PHB, NODE, SYS or SOC"


@dataclass(frozen=True, order=True)
class Link:
    """The connection between two devices: ``kind`` is ``"NV"`` or a PCIe kind;
    ``nvlinks`` is the number of bonded NVLinks (0 for PCIe)."""

    kind: str
    nvlinks: int = 0

    def __post_init__(self) -> None:
        if self.kind == NVLINK:
            if not 1 <= self.nvlinks <= MAX_NVLINKS:
                raise LinkError(f"an NVLink needs 1..{MAX_NVLINKS} links, got {self.nvlinks}")
        elif self.kind not in PCIE_SCORE:
            raise LinkError(f"unknown link kind {self.kind!r}; expected {EXPECTED_LABELS}")
        elif self.nvlinks:
            raise LinkError(f"a {self.kind} link has no NVLinks, got {self.nvlinks}")

    @property
    def is_nvlink(self) -> bool:
        return self.kind == NVLINK

    @property
    def label(self) -> str:
        """The ``nvidia-smi topo -m`` spelling: ``NV2``, ``PIX``, ``SYS`` …"""
        return f"NV{self.nvlinks}" if self.is_nvlink else self.kind

    @property
    def score(self) -> int:
        return pair_score(self)

    def __str__(self) -> str:
        return self.label


def nvlink(count: int) -> Link:
    return Link(NVLINK, count)


def parse_link(label: str) -> Link:
    """``"NV12"`` → ``Link("NV", 12)``; ``"SOC"`` → ``Link("SYS")``. Raises :class:`LinkError`."""
    text = label.strip().upper()
    match = _NV.fullmatch(text)
    if match:
        count = int(match.group(1))
        if count < 1:
            raise LinkError(f"expected {EXPECTED_LABELS}, got {label!r}")
        return Link(NVLINK, count)
    text = ALIASES.get(text, text)
    if text not in PCIE_SCORE:
        raise LinkError(f"expected {EXPECTED_LABELS}, got {label!r}")
    return Link(text)


def pair_score(link: Link | None) -> int:
    """The worth of one GPU pair (see the table above); 0 for no known path."""
    if link is None:
        return 0
    if link.is_nvlink:
        return NVLINK_BASE_SCORE + NVLINK_SCORE_PER_LINK * link.nvlinks
    return PCIE_SCORE[link.kind]
