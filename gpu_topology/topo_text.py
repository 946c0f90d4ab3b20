"""Reading the text of ``nvidia-smi topo -m`` (or ``-mp``) into a :class:`Topology`.

What real outputs contain, all taken here: columns separated by tabs or by runs of
spaces; `` X `` on the diagonal; NIC rows and columns (``mlx5_0``, or ``NIC0`` with a
"NIC Legend" block naming them); ``NV#`` with one or two digits; the old (``SOC``)
and new (``SYS``/``NODE``) legends; trailing affinity columns ("CPU Affinity",
"NUMA Affinity", "GPU NUMA ID") that NIC rows leave empty; the legend block
after the matrix, which ends it; and the terminal escapes recent drivers wrap the header
in (``\x1b[4m`` … ``\x1b[0m``, underlined), even when the output goes to a file (seen
with driver 580 on an H200). A malformed matrix raises :class:`TopoFormatError`
with the line number and what was expected there; so does a file that is not a
regular file, is larger than ``MAX_TOPO_TEXT_BYTES`` or is not UTF-8.
"""
from __future__ import annotations

import re
from pathlib import Path

from gangmaster.conf.fields import ConfigError, NotUTF8, decode_utf8, read_limited
from gangmaster.conf.limits import MAX_TOPO_TEXT_BYTES

from .links import EXPECTED_LABELS, Link, LinkError, parse_link
from .model import GpuAffinity, Topology, TopologyError

AFFINITY_HEADINGS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_AFFINITY_FIRST_WORDS = {h.split()[0] for h in AFFINITY_HEADINGS}
_GPU = re.compile(r"GPU(\d+)")
_NIC_LEGEND = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*")
_TERMINAL_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class TopoFormatError(ConfigError):
    """A ``topo -m`` text that cannot be read; names the source, the line (0: the file as
    a whole) and what was expected. A ConfigError, so the CLI reports it with status 2."""

    def __init__(self, source: str, line: int, expected: str, got: str | None = None):
        self.source, self.line, self.expected = source, line, expected
        self.field = f"line {line}" if line else ""
        text = f"{source}: {self.field}: expected {expected}" if line else f"{source}: expected {expected}"
        if got is not None:
            text += f", got {got!r}"
        ValueError.__init__(self, text)


def read_topo_file(path: str | Path, name: str | None = None) -> Topology:
    """Read a saved ``nvidia-smi topo -m`` output; the topology is named after the file."""
    path = Path(path)
    try:
        text = decode_utf8(read_limited(path, MAX_TOPO_TEXT_BYTES, "MAX_TOPO_TEXT_BYTES"), str(path))
    except NotUTF8 as exc:
        raise TopoFormatError(str(path), exc.line, exc.expected) from None
    except ConfigError as exc:      # missing, not a regular file, too large
        raise TopoFormatError(str(path), 0, exc.expected) from None
    return parse_topo_text(text, source=str(path), name=name or path.stem)


def parse_topo_text(text: str, source: str = "<topo -m>", name: str = "topo-m") -> Topology:
    lines = _TERMINAL_ESCAPE.sub("", text).splitlines()
    start = next((k for k, line in enumerate(lines) if line.strip()), None)
    if start is None:
        raise TopoFormatError(source, 1, "a header line listing GPU0, GPU1, …", "an empty text")
    devices, headings = _read_header(lines[start], source, start + 1)
    gpu_count = sum(1 for d in devices if _GPU.fullmatch(d))

    cells: list[list[Link | None]] = []
    row_line: list[int] = []
    affinity: list[GpuAffinity] = []
    k = start + 1
    for row, device in enumerate(devices):
        lineno = k + 1
        if k >= len(lines) or not lines[k].strip() or lines[k].strip().endswith("Legend:"):
            raise TopoFormatError(source, lineno, f"the row of {device} ({len(devices)} rows in all, "
                                  f"one per column)", lines[k].strip() if k < len(lines) else "end of text")
        tokens = lines[k].split()
        if tokens[0] != device:
            raise TopoFormatError(source, lineno, f"the row of {device} (rows in column order)", tokens[0])
        values = tokens[1:]
        if len(values) < len(devices):
            raise TopoFormatError(source, lineno, f"{len(devices)} link cells in the row of {device} "
                                  f"(one per column {devices[0]}..{devices[-1]})", f"{len(values)} cells")
        extra = values[len(devices):]
        if len(extra) > len(headings):
            raise TopoFormatError(source, lineno, f"at most {len(headings)} affinity value(s) after the "
                                  f"link cells of {device}", " ".join(extra))
        links: list[Link | None] = []
        for col, cell in enumerate(values[:len(devices)]):
            if col == row:
                if cell != "X":
                    raise TopoFormatError(source, lineno, f"X where {device} meets itself (column {col + 1})", cell)
                links.append(None)
                continue
            try:
                links.append(parse_link(cell))
            except LinkError:
                raise TopoFormatError(source, lineno, f"a link ({EXPECTED_LABELS}) in column "
                                      f"{devices[col]} of the row of {device}", cell) from None
        cells.append(links)
        row_line.append(lineno)
        if row < gpu_count:
            found = {h: v for h, v in zip(headings, extra) if v != "N/A"}
            affinity.append(GpuAffinity(cpus=found.get("CPU Affinity"),
                                        numa=found.get("NUMA Affinity", found.get("GPU NUMA ID"))))
        k += 1

    for i in range(len(devices)):
        for j in range(i + 1, len(devices)):
            if cells[i][j] != cells[j][i]:
                raise TopoFormatError(
                    source, row_line[j], f"{devices[j]}-{devices[i]} to match {devices[i]}-{devices[j]} "
                    f"on line {row_line[i]} ({cells[i][j]}): the matrix is symmetric", str(cells[j][i]))

    names = _nic_names(lines[k:])
    nic_links = {names.get(devices[r], devices[r]): [cells[r][c] for c in range(gpu_count)]
                 for r in range(gpu_count, len(devices))}
    try:
        return Topology(name, [row[:gpu_count] for row in cells[:gpu_count]], nic_links=nic_links,
                        affinity=affinity, source=source,
                        description=f"read from nvidia-smi topo -m output {source}")
    except TopologyError as exc:
        raise TopoFormatError(source, start + 1, "a valid topology", str(exc)) from None


def _read_header(line: str, source: str, lineno: int) -> tuple[list[str], list[str]]:
    """Device columns (GPUs first, then NICs), then the affinity headings."""
    tokens = line.split()
    devices: list[str] = []
    rest: list[str] = []
    for t, token in enumerate(tokens):
        if token in _AFFINITY_FIRST_WORDS:
            rest = tokens[t:]
            break
        devices.append(token)
    headings: list[str] = []
    text = " ".join(rest)
    while text:
        heading = next((h for h in AFFINITY_HEADINGS if text.startswith(h)), None)
        if heading is None:
            raise TopoFormatError(source, lineno, "affinity headings (" + ", ".join(AFFINITY_HEADINGS) + ")",
                                  text)
        headings.append(heading)
        text = text[len(heading):].strip()
    gpus = [d for d in devices if _GPU.fullmatch(d)]
    if not gpus:
        raise TopoFormatError(source, lineno, "a header line listing GPU0, GPU1, …", line.strip())
    for position, device in enumerate(devices[:len(gpus)]):
        if device != f"GPU{position}":
            raise TopoFormatError(source, lineno, f"GPU{position} as column {position + 1} "
                                  "(GPU columns first, in order)", device)
    if len(set(devices)) != len(devices):
        raise TopoFormatError(source, lineno, "each device column once", line.strip())
    return devices, headings


def _nic_names(legend: list[str]) -> dict[str, str]:
    """Newer drivers name NIC columns NIC0…; the "NIC Legend" block maps them to devices."""
    names: dict[str, str] = {}
    in_nic_legend = False
    for line in legend:
        if line.strip() == "NIC Legend:":
            in_nic_legend = True
            continue
        match = _NIC_LEGEND.fullmatch(line) if in_nic_legend else None
        if match:
            names[match.group(1)] = match.group(2)
    return names


def format_topo_text(topology: Topology, sep: str = "\t") -> str:
    """The GPU part of a topology in ``nvidia-smi topo -m`` form (no NICs: the model
    keeps NIC-to-GPU links only), affinity columns included. ``sep`` is ``"\\t"``
    as the driver prints it, or runs of spaces. :func:`parse_topo_text` reads it back."""
    g = topology.gpu_count
    has_cpus = any(a.cpus for a in topology.affinity)
    has_numa = any(a.numa for a in topology.affinity)
    header = [""] + [f"GPU{i}" for i in range(g)]
    header += ["CPU Affinity"] * has_cpus + ["NUMA Affinity"] * has_numa
    rows = [header]
    for i in range(g):
        a = topology.affinity[i]
        cells = [" X " if i == j else topology.link(i, j).label for j in range(g)]
        rows.append([f"GPU{i}"] + cells + [a.cpus or "N/A"] * has_cpus + [a.numa or "N/A"] * has_numa)
    if sep == "\t":
        return "\n".join("\t".join(r) for r in rows) + "\n"
    width = max(len(c) for r in rows for c in r) + len(sep)
    return "\n".join("".join(c.ljust(width) for c in r).rstrip() for r in rows) + "\n"
