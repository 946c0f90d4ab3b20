"""``gangmaster topo``: show a node's GPU topology and what the ``topology`` strategy
would choose on it."""
from __future__ import annotations

import argparse
import json
import sys

from gangmaster.conf.settings import Settings
from gangmaster.gpu_topology.chooser import chooser_for
from gangmaster.gpu_topology.masks import (MaskError, format_mask, full_mask, indices_of,
                                           lowest_bits, mask_from_indices, popcount, validate_mask)
from gangmaster.gpu_topology.model import Topology
from gangmaster.gpu_topology.nvml_reader import NvmlUnavailable, nvml_or_preset
from gangmaster.gpu_topology.presets import UnknownPreset, load_preset, preset_names
from gangmaster.gpu_topology.topo_text import TopoFormatError, read_topo_file
from gangmaster.tools.arg_types import count


def add_parser(sub):
    parser = sub.add_parser(
        "topo", help="show a GPU topology (NVML, a `nvidia-smi topo -m` file, or a preset) "
                     "and the GPUs the topology strategy would choose",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Show a node's GPU interconnect: the GPU-by-GPU link matrix (NV<k> = k bonded "
                    "NVLinks; BOARD, PIX, PXB, PHB, NODE, SYS = PCIe paths, closest first), CPU/NUMA "
                    "affinity, and the NVLink cliques (maximal sets of GPUs pairwise joined by NVLink). "
                    "With --request N, also the N GPUs the `topology` strategy would give and their "
                    "score, next to qizhi's lowest free bits.",
        epilog="examples:\n"
               "  gangmaster topo                              # this machine, via NVML\n"
               "  gangmaster topo --preset dgx1-v100 --request 2 --free 0,2,3,5,6\n"
               "  gangmaster topo --from-file topo.txt --json  # a saved `nvidia-smi topo -m`\n"
               "  gangmaster topo --list-presets\n\n"
               "Without a driver, NVML cannot be read: the command says so on stderr and shows the\n"
               "configured fallback preset (topology.fallback_preset in conf/defaults.yaml, or\n"
               "--fallback-preset). Pair scores: NV<k> = 100+10k, BOARD 60, PIX 50, PXB 40, PHB 30,\n"
               "NODE 20, SYS 10; a set scores the sum over its pairs.")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from-file", metavar="PATH", help="read a saved `nvidia-smi topo -m` output")
    source.add_argument("--preset", metavar="NAME", help="a preset from conf/topologies/ (see --list-presets)")
    source.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    parser.add_argument("--fallback-preset", metavar="NAME",
                        help="preset to show when NVML is unavailable (default: topology.fallback_preset)")
    parser.add_argument("--config", metavar="FILE",
                        help="settings YAML overriding conf/defaults.yaml (its `topology:` section)")
    parser.add_argument("--request", type=count(), metavar="N", help="choose N GPUs as the topology strategy would")
    parser.add_argument("--free", metavar="LIST",
                        help="comma-separated free GPU indices for --request, e.g. 0,2,5 (default: all free)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.set_defaults(func=run)
    return parser


def configured_fallback_preset(config: str | None = None) -> str | None:
    """``topology.fallback_preset`` from conf/defaults.yaml, or from the ``--config``
    override file (null: no fallback)."""
    section = Settings(config).section("topology")
    value = section.raw("fallback_preset", None)
    if value is not None and not isinstance(value, str):
        raise section.error("fallback_preset", "a preset name or null", value)
    return value


def run(args) -> int:
    if args.list_presets:
        return _list_presets(args.json)
    try:
        topology, note = _load(args)
    except (TopoFormatError, UnknownPreset, NvmlUnavailable) as exc:
        print(f"gangmaster topo: {exc}", file=sys.stderr)
        return 2
    if note:
        print(f"gangmaster topo: {note}", file=sys.stderr)
    choice = None
    if args.request is not None or args.free is not None:
        try:
            choice = _choose(topology, args.request, args.free)
        except (MaskError, ValueError) as exc:
            print(f"gangmaster topo: {exc}", file=sys.stderr)
            return 2
    if args.json:
        out = topology.to_dict()
        if note:
            out["note"] = note
        if choice is not None:
            out["request"] = choice
        print(json.dumps(out, indent=2))
    else:
        print(render(topology))
        if choice is not None:
            print()
            print(_render_choice(choice))
    return 1 if choice is not None and not choice["chosen"] else 0


def _load(args) -> tuple[Topology, str | None]:
    if args.from_file:
        return read_topo_file(args.from_file), None
    if args.preset:
        return load_preset(args.preset), None
    fallback = args.fallback_preset or configured_fallback_preset(args.config)
    try:
        return nvml_or_preset(fallback)
    except NvmlUnavailable as exc:
        raise NvmlUnavailable(f"{exc}; no fallback preset is configured (topology.fallback_preset): "
                              "use --preset NAME, --from-file PATH or --fallback-preset NAME") from None


def _choose(topology: Topology, request: int | None, free_text: str | None) -> dict:
    if request is None:
        raise ValueError("--free needs --request N")
    g = topology.gpu_count
    if not 1 <= request <= g:
        raise ValueError(f"--request: expected 1..{g} GPUs (the node has {g}), got {request}")
    if free_text is None:
        free = full_mask(g)
    else:
        try:
            indices = [int(x) for x in free_text.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--free: expected comma-separated GPU indices like 0,2,5, got {free_text!r}") from None
        outside = [i for i in indices if not 0 <= i < g]
        if outside:
            raise ValueError(f"--free: GPU(s) {outside} are not on this {g}-GPU node (expected 0..{g - 1})")
        free = validate_mask(mask_from_indices(indices), g)
    chooser = chooser_for(topology)
    chosen = chooser.choose(free, request)
    baseline = lowest_bits(free, request)
    result = {"gpus": request, "free": indices_of(free), "chosen": indices_of(chosen),
              "chosen_mask": chosen, "score": chooser.score(chosen) if chosen else None,
              "all_nvlink": topology.all_nvlink(chosen) if chosen else None,
              "lowest_bits": indices_of(baseline),
              "lowest_bits_score": chooser.score(baseline) if baseline else None}
    if not chosen:
        result["error"] = f"only {popcount(free)} GPU(s) free, {request} requested"
    return result


def render(topology: Topology) -> str:
    """The matrix as `nvidia-smi topo -m` prints it, then the NVLink cliques."""
    g = topology.gpu_count
    nics = topology.nics
    columns = [f"GPU{i}" for i in range(g)] + nics
    rows = []
    for i in range(g):
        cells = ["X" if i == j else topology.link(i, j).label for j in range(g)]
        cells += [topology.nic_link(nic, i).label for nic in nics]
        a = topology.affinity[i]
        rows.append([f"GPU{i}"] + cells + [a.cpus or "-", a.numa or "-"])
    for nic in nics:
        rows.append([nic] + [topology.nic_link(nic, j).label for j in range(g)] + [""] * len(nics) + ["", ""])
    header = [""] + columns + ["CPU Affinity", "NUMA"]
    widths = [max(len(r[c]) for r in rows + [header]) for c in range(len(header))]
    lines = [f"{topology.name}: {topology.description}" if topology.description else topology.name,
             f"source: {topology.source}" if topology.source else "", ""]
    for row in [header] + rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    lines.append("")
    cliques = topology.nvlink_cliques()
    lines.append("NVLink cliques (GPUs pairwise joined by NVLink):" if cliques else
                 "NVLink cliques: none (no NVLink between these GPUs)")
    for clique in cliques:
        lines.append(f"  {clique}  ({len(clique)} GPUs, set score {topology.set_score(clique)})")
    return "\n".join(line for k, line in enumerate(lines) if line or k != 1)


def _render_choice(choice: dict) -> str:
    head = f"request {choice['gpus']} GPU(s), free {choice['free']}:"
    if not choice["chosen"]:
        return f"{head}\n  cannot be served: {choice['error']}"
    yes = {True: "yes", False: "no"}
    return (f"{head}\n"
            f"  topology strategy: {choice['chosen']}  score {choice['score']}  "
            f"all NVLink: {yes[choice['all_nvlink']]}  mask {format_mask(choice['chosen_mask'])}\n"
            f"  lowest free bits:  {choice['lowest_bits']}  score {choice['lowest_bits_score']}")


def _list_presets(as_json: bool) -> int:
    presets = [load_preset(name) for name in preset_names()]
    if as_json:
        print(json.dumps([{"name": t.name, "gpus": t.gpu_count, "description": t.description}
                          for t in presets], indent=2))
    else:
        width = max(len(t.name) for t in presets)
        for t in presets:
            print(f"{t.name.ljust(width)}  {t.gpu_count:2d} GPUs  {t.description}")
    return 0
