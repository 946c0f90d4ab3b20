"""``gangmaster select``: pick a node (and its GPUs and ports) for one request."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from gangmaster.gpu_topology.masks import MaskError, format_mask, indices_of, mask_from_indices
from gangmaster.selectors.cluster_file import load_cluster
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.fgd import NeedsWorkload
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortError, PortRanges
from gangmaster.selectors.request import RACK_POLICIES, SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import UnknownSelector, get_selector
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.selectors.workload import WorkloadShapes
from gangmaster.tools.arg_types import count, seed


def add_parser(sub):
    p = sub.add_parser(
        "select", help="pick a node and GPUs for a request, and explain the choice",
        description="Run the select() pipeline for one container request on a cluster file and "
                    "print the chosen node, its GPUs and ports, and what the filters removed. "
                    "Exit status 1 when no node fits (the explanation says why, in numbers), 2 on bad input.",
        epilog="Defaults: --memory 1024 MB, --vcores 1, no GPUs or ports, role worker, 1 pending "
               "instance; the strategy, seed and rack policy come from the selection: section of the "
               "settings (conf/defaults.yaml, or --config).")
    p.add_argument("--cluster", help="cluster YAML (default: the embedded conf/clusters/default.yaml)")
    p.add_argument("--config", help="settings YAML overriding conf/defaults.yaml")
    p.add_argument("--role", default="worker", help="task role the request is for (default: worker)")
    p.add_argument("--memory", type=count(0), default=1024, help="memory per instance, MB (default: 1024)")
    p.add_argument("--vcores", type=float, default=1.0, help="vcores per instance, fractions allowed (default: 1)")
    p.add_argument("--gpus", type=count(0), default=0, help="GPUs per instance")
    p.add_argument("--gpu-indices", help="exact GPUs to ask for, e.g. 0,1 (sets the GPU mask); with "
                                         "--gpu-milli, the one GPU the share must sit on")
    p.add_argument("--gpu-milli", type=count(1, GPU_MILLI - 1),
                   help=f"a share of one GPU in milli-GPU (1..{GPU_MILLI - 1}, e.g. 500 for half a GPU) "
                        f"instead of whole GPUs; the strategy picks the GPU (by default the one with the "
                        f"least milli free that still fits)")
    p.add_argument("--ports", type=count(0), default=0, help="number of ports to choose")
    p.add_argument("--reuse-ports", help="ports the role already uses, e.g. 20000-20001")
    p.add_argument("--label", help="node label the node must carry")
    p.add_argument("--gpu-type", action="append", default=[], help="acceptable GPU type (repeatable)")
    p.add_argument("--pending", type=count(), default=1, help="instances of the role still waiting (default: 1)")
    p.add_argument("--max-per-node", type=count(), help="at most this many instances of the role per node")
    p.add_argument("--rack-policy", choices=RACK_POLICIES, help="override the configured rack policy")
    p.add_argument("--placed-hosts", default="", help="hosts already holding the job's tasks, comma separated")
    p.add_argument("--selector", help="strategy name (see `gangmaster selectors`)")
    p.add_argument("--workload", metavar="FILE",
                   help="the workload's typical task shapes, YAML or JSON (selectors/workload.py): "
                        "given to the strategy; fgd needs it")
    p.add_argument("--seed", type=seed, help="seed of the tie-breaking RNG")
    p.add_argument("--all", action="store_true", help="list every ranked candidate, not just the pick")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)
    return p


def _settings(args) -> SelectionSettings:
    settings = SelectionSettings.load(args.config)
    changes = {}
    if args.selector:
        changes["selector"] = args.selector
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.rack_policy:
        changes["rack_policy"] = args.rack_policy
    return replace(settings, **changes)


def _bad_input(exc: Exception) -> int:
    print(f"gangmaster select: {exc}", file=sys.stderr)
    return 2


def _gpu_mask(text: str) -> int:
    """``--gpu-indices 0,2`` → the mask of GPUs 0 and 2; bad indices name the limit."""
    try:
        indices = [int(part) for part in text.split(",")]
    except ValueError:
        raise MaskError(f"--gpu-indices: expected GPU indices like 0,1, got {text!r}") from None
    return mask_from_indices(indices)


def run(args) -> int:
    settings = _settings(args)
    try:
        selector = get_selector(settings.selector, settings.candidate_nodes_factor)
        if args.workload:
            selector.observe_workload(WorkloadShapes.from_file(args.workload))
    except (UnknownSelector, ConfigError) as exc:
        return _bad_input(exc)
    try:
        mask = _gpu_mask(args.gpu_indices) if args.gpu_indices else 0
        reuse = PortRanges.parse(args.reuse_ports) if args.reuse_ports else PortRanges()
        resource = ResourceDescriptor(args.memory, args.vcores, args.gpus if not mask else 0, mask, args.ports,
                                      gpu_milli=args.gpu_milli or 0)
        request = SelectionRequest(
            role=args.role, resource=resource, node_label=args.label, gpu_types=tuple(args.gpu_type),
            pending_tasks=args.pending, reuse_ports=reuse,
            placed_hosts=tuple(h for h in args.placed_hosts.split(",") if h),
            max_instances_per_node=args.max_per_node, rack_policy=settings.rack_policy)
    except (ValueError, PortError) as exc:  # MaskError and ResourceError are ValueErrors
        return _bad_input(exc)
    view = load_cluster(args.cluster)
    pipeline = SelectionPipeline(settings, selector)
    try:
        result = (pipeline.select if args.all else pipeline.select_single_node)(view, request)
    except NotAvailable as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc), "explanation": exc.explanation.to_dict()}, indent=2))
        else:
            print(f"no node fits: {exc}")
        return 1
    except PortError as exc:
        print(f"no ports: {exc}")
        return 1
    except NeedsWorkload as exc:
        return _bad_input(exc)
    resource = request.resource
    if args.json:
        print(json.dumps({
            "ok": True, "selector": selector.name, "resource": str(result.resource),
            "ports": str(result.ports) if result.ports else None,
            "candidates": [_candidate_json(view.node(c.host), c.gpu_mask, resource.gpu_milli)
                           for c in result.candidates],
            "explanation": result.explanation.to_dict(),
        }, indent=2))
        return 0
    print(f"selector: {selector.name}    request: {result.resource}")
    for rank, c in enumerate(result.candidates, 1):
        node = view.node(c.host)
        if resource.gpu_milli:
            print(f"{rank:>3}. {c.host:<20} rack={node.rack:<10} {_share_text(node, c.gpu_mask, resource.gpu_milli)}"
                  f"  free={node.free}")
            continue
        gpus = format_mask(c.gpu_mask) if c.gpu_mask else "-"
        print(f"{rank:>3}. {c.host:<20} rack={node.rack:<10} gpus={gpus:<16} free={node.free}")
    if result.ports:
        print(f"ports: {result.ports}")
    print(result.explanation.summary())
    return 0


def _share_text(node, gpu_mask: int, share: int) -> str:
    """``gpu=3 share=250 milli (of 700 free; per GPU 1000,700)``: the GPU a share gets,
    and what each GPU of the node has free before it."""
    gpu = gpu_mask.bit_length() - 1
    per_gpu = ",".join(map(str, node.gpu_milli_free))
    return f"gpu={gpu} share={share} milli (of {node.gpu_milli_free[gpu]} free; per GPU {per_gpu})"


def _candidate_json(node, gpu_mask: int, share: int) -> dict:
    """One candidate for --json: its GPUs (for a share, the GPU and the share) and the
    node's milli-GPU free per GPU."""
    doc = {"host": node.host, "gpu_mask": gpu_mask, "gpus": indices_of(gpu_mask), "rack": node.rack}
    if share:
        doc.update(gpu=gpu_mask.bit_length() - 1, gpu_milli=share)
    doc["gpu_milli_free"] = list(node.gpu_milli_free)
    return doc
