"""``gangmaster validate JOB.yaml``: check a job spec and show what the AM will read."""
from __future__ import annotations

import argparse
import json
import sys

from gangmaster.am.spec.jobspec import load_job
from gangmaster.am.spec.jobspec_model import JobSpec, RoleSpec
from gangmaster.conf.fields import ConfigError, ConfigErrors

from .rmsim.workload import RoleBehaviour


def add_parser(sub):
    p = sub.add_parser(
        "validate", help="check a job spec (OpenPAI v2 + gangmaster: keys) and print it parsed",
        description="Load a job spec in the OpenPAI job protocol v2 shape, check every field, "
                    "and print the roles, gangs, resources (planned and as asked of the RM), "
                    "policies, and the OpenPAI-only fields that are kept but unused. On errors, "
                    "print every one (file, field path, what was expected, what was found) and "
                    "exit with status 2. The gangmaster: keys are documented in "
                    "conf/jobs/README.md.",
        epilog="Example: gangmaster validate conf/jobs/parameter-server.yaml")
    p.add_argument("job", metavar="JOB.yaml", help="job spec file")
    p.add_argument("--json", action="store_true",
                   help="machine-readable output: the parsed job, or {\"errors\": [...]}")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    try:
        spec = load_job(args.job)
    except ConfigError as exc:
        if args.json:
            errors = exc.errors if isinstance(exc, ConfigErrors) else [exc]
            print(json.dumps({"valid": False, "errors": [
                {"source": e.source, "field": e.field, "message": str(e)} for e in errors]},
                indent=2))
        else:
            print(f"gangmaster: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"valid": True, "job": to_json(spec)}, indent=2))
    else:
        print(render(spec))
    return 0


def to_json(spec: JobSpec) -> dict:
    """The parsed job, each role with what its tasks do in simulation (as the workload model reads it)."""
    data = spec.to_dict()
    for role, spec_role in zip(data["roles"], spec.roles):
        simulated = _simulated(spec, spec_role)
        failure = simulated.failure
        role.update(simulated_duration_s=simulated.duration_s, simulated_exit_code=simulated.exit_code,
                    simulated_failure={"attempts": list(failure.attempts), "instance": failure.instance,
                                       "exit_code": failure.exit_code, "before_barrier": failure.before_barrier})
    return data


def render(spec: JobSpec) -> str:
    """Human-readable summary of a valid job."""
    lines = [f"{spec.source}: job {spec.name!r} is valid"
             + (f" — {spec.description}" if spec.description else "")]
    for index, names in enumerate(spec.gangs):
        roles = spec.gang_roles(index)
        count = sum(r.instances for r in roles)
        domain = roles[0].gang_network_domain
        inside = f", network domain: {domain}" if domain else ""
        lines.append(f"gang {index}: {', '.join(names)} ({count} instances, all or nothing{inside})")
    timeout = ("unlimited" if spec.barrier_timeout_s is None
               else f"{spec.barrier_timeout_s:g} s")
    lines.append(f"retry: scope {spec.retry.scope}, {spec.retry.attempts} attempt(s) in all; "
                 f"barrier timeout: {timeout}")
    header = ("role", "inst", "cpu", "ask", "memMB", "gpu", "ports", "per-node", "label",
              "gpu types", "selector", "rack", "sim s")
    rows = [header] + [_row(r, _simulated(spec, r)) for r in spec.roles]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    if any(r.gpu_milli for r in spec.roles):
        lines.append("  (gpu 250m: a share of one GPU, 250 milli-GPU per instance)")
    for role in spec.roles:
        c = role.completion
        fails = (f"fails at {c.min_failed} failed" if c.min_failed is not None
                 else "never fails by count")
        succeeds = (f"succeeds at {c.min_succeeded} succeeded" if c.min_succeeded is not None
                    else "succeeds when all have completed")
        lines.append(f"role {role.name}: attempt {fails}, {succeeds}; retry scope "
                     f"{role.retry.scope}, {role.retry.attempts} attempt(s)"
                     + (f"; network domain: {role.network_domain}" if role.network_domain else ""))
        lines += [f"  completion.{note}" for note in c.notes]
        failure = _simulated(spec, role).failure
        if failure.attempts:
            when = " at once, before its barrier," if failure.before_barrier else ""
            lines.append(f"  testing aid: instance {failure.instance} exits {failure.exit_code}{when} "
                         f"in attempt(s) {', '.join(map(str, failure.attempts))}")
        for command in role.commands:
            lines.append(f"  $ {command.rstrip()}")
    if spec.unused:
        lines.append("unused here (kept; they matter on an OpenPAI cluster): "
                     + ", ".join(spec.unused))
    return "\n".join(lines)


def _simulated(spec: JobSpec, role: RoleSpec) -> RoleBehaviour:
    """What the simulator's workload model makes of the role's tasks."""
    return RoleBehaviour.from_keys(spec.simulation.get(role.name, {}))


def _row(role: RoleSpec, simulated: RoleBehaviour) -> tuple[str, ...]:
    ports = ",".join(f"{k}:{v}" for k, v in role.ports.items()) or "-"
    return (role.name, str(role.instances), str(role.cpu), f"{role.ask_vcores:g}",
            str(role.memory_mb), f"{role.gpu_milli}m" if role.gpu_milli else str(role.gpus), ports,
            str(role.max_instances_per_node or "-"), role.node_label or "-",
            ",".join(role.gpu_types) or "any", role.selector or "default", role.rack_policy or "default",
            f"{simulated.duration_s:g}")
