"""``gangmaster run JOB.yaml --rm slurm``: the run command's Slurm branch.

``--account``, ``--qos`` and ``--time`` go to every ``sbatch`` as they are (checked here
first, so a typo is exit 2 and not a job Slurm refuses an hour later). ``--dry-run`` runs
the AM as a real run does, up to the ``sbatch`` of each job's first gangs, and prints
those commands and the job script instead of running them: the gang's placement needs
the cluster's nodes, so a dry run needs a reachable Slurm (``sinfo``), but submits
nothing and leaves no work folder (it runs in a scratch folder, and prints the paths a
real run into the work folder would use).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

#: ``sbatch --time``'s formats: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or no limit.
SLURM_TIME = re.compile(r"(\d+(:\d{1,2}){0,2}|\d+-\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE)", re.IGNORECASE)
#: How long a dry run waits for the AM to ask for every job's first gang.
DRY_RUN_WAIT_S = 30.0
#: ... and then for gangs asked in the heartbeats right after.
DRY_RUN_SETTLE_S = 1.0
#: The options only a Slurm run takes (besides --partition).
SLURM_ONLY = ("account", "qos", "time", "dry_run")


def _name_ok(value: str) -> bool:
    return bool(value) and all(c.isalnum() or c in "-_." for c in value)


def sbatch_options(args) -> tuple[list[str], str]:
    """(``--account``, ``--qos``, ``--time`` as sbatch takes them; the first one that is not
    what Slurm takes, as a message, or "")."""
    options = []
    for flag, what in (("account", "a Slurm account name"), ("qos", "a Slurm QOS name")):
        value = getattr(args, flag, None)
        if value is None:
            continue
        if not _name_ok(value):
            return [], f"--{flag}: expected {what} (letters, digits, - _ .), got {value!r}"
        options.append(f"--{flag}={value}")
    limit = getattr(args, "time", None)
    if limit is not None:
        if not SLURM_TIME.fullmatch(limit):
            return [], (f"--time: expected a Slurm time limit (minutes, H:M:S, D-H:M:S or UNLIMITED), "
                        f"got {limit!r}")
        options.append(f"--time={limit}")
    return options, ""


def run_on_slurm(args, jobs, am_settings, selection, echo) -> int:
    from gangmaster.am.barrier.config import BarrierConfig
    from gangmaster.protocol.rm_protocol import RMError
    from gangmaster.tools.run_cmd import new_work_dir, print_metrics_url, print_reports

    from .client import SlurmError, SlurmRMClient
    from .runs import SlurmRuns

    if args.rm != "slurm":
        given = [f"--{name.replace('_', '-')}" for name in ("partition", *SLURM_ONLY) if getattr(args, name, None)]
        what = "is a Slurm option: it needs" if len(given) == 1 else "are Slurm options: they need"
        print(f"gangmaster run: {', '.join(given)} {what} --rm slurm", file=sys.stderr)
        return 2
    unsupported = [f"--{name}" for name in ("cluster", "queues", "scenario") if getattr(args, name)]
    if args.live:
        unsupported.append("--live")
    if unsupported:
        print(f"gangmaster run: {', '.join(unsupported)} cannot be used with --rm slurm (Slurm's nodes are the "
              f"cluster, its partitions the queues, and every run is live)", file=sys.stderr)
        return 2
    if args.partition and not _name_ok(args.partition):
        print(f"gangmaster run: --partition {args.partition!r}: expected a Slurm partition name", file=sys.stderr)
        return 2
    options, bad = sbatch_options(args)
    if bad:
        print(f"gangmaster run: {bad}", file=sys.stderr)
        return 2
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        print(f"gangmaster run: SLURM_CONF={conf} is not a file: point it at the cluster's slurm.conf "
              f"(`gangmaster slurm local-cluster start` prints it)", file=sys.stderr)
        return 2
    base = Path(args.work_dir) if args.work_dir else new_work_dir(jobs[0].name)
    if getattr(args, "dry_run", False):
        return dry_run(args, jobs, am_settings, selection, base, options)
    client = SlurmRMClient(base / "slurm", args.partition, sbatch_options=options)
    try:   # before anything is written: a run Slurm cannot take leaves no folder behind
        client.ping()
    except SlurmError as exc:
        print(f"gangmaster run: cannot reach Slurm (is SLURM_CONF set? is slurmctld running?): {exc.message}",
              file=sys.stderr)
        return 2
    base.mkdir(parents=True, exist_ok=True)
    if echo is not None and not conf:
        echo("SLURM_CONF is not set: using the Slurm cluster of this machine's default configuration")
    runs = SlurmRuns(base, args.partition, am_settings, selection, BarrierConfig.load(args.config), echo=echo,
                     client=client)
    runs.prefix_lines = len(jobs) > 1
    interrupted = None
    try:
        work_dirs = [base if len(jobs) == 1 else base / f"{k}-{job.name}" for k, job in enumerate(jobs)]
        for job, work_dir in zip(jobs, work_dirs):
            runs.check_work_dir(job, work_dir)
        for job, work_dir in zip(jobs, work_dirs):
            runs.submit(job, work_dir, "default")
        print_metrics_url(runs, args.json)
        finished = runs.run(args.timeout)
    except KeyboardInterrupt:
        finished, interrupted = False, signal.SIGINT
    except RMError as exc:   # Slurm did not answer while the jobs were submitted
        print(f"gangmaster run: {exc.message}", file=sys.stderr)
        return 1
    finally:
        runs.shutdown()
        interrupted = interrupted or runs.interrupted
    print_reports(runs, base, args.json)
    if interrupted is not None:
        print(f"gangmaster run: interrupted by {interrupted.name}; its Slurm jobs were cancelled", file=sys.stderr)
        return 128 + interrupted
    if runs.failure is not None:   # an AM failed: run() ended early, --timeout had nothing to do with it
        print(f"gangmaster run: {runs.failure}; the run was stopped and its Slurm jobs were cancelled",
              file=sys.stderr)
        return 1
    if not finished:
        print("gangmaster run: stopped before every job finished (--timeout); its Slurm jobs were cancelled",
              file=sys.stderr)
        return 1
    return 0 if all(r.outcome == "succeeded" for r in runs.runs) else 1


def dry_run(args, jobs, am_settings, selection, base: Path, options: list[str]) -> int:
    """``--dry-run``: the ``sbatch`` of each job's first gangs and the job script, printed
    (see the module's docstring); exit 0 once every job's first gang was asked for, 1 when
    one was not within :data:`DRY_RUN_WAIT_S` (its AM's words on stderr say why)."""
    from gangmaster.am.barrier.config import BarrierConfig

    from .client import SlurmError, SlurmRMClient
    from .runs import SlurmRuns

    commands: list[list[str]] = []
    lock = threading.Lock()

    def record(command: list[str]) -> None:
        with lock:
            commands.append(list(command))

    scratch = Path(tempfile.mkdtemp(prefix="gangmaster-dry-run-"))
    try:
        client = SlurmRMClient(scratch / "slurm", args.partition, sbatch_options=options, dry_run=record)
        try:
            client.ping()
        except SlurmError as exc:
            print(f"gangmaster run: --dry-run places the gang on Slurm's nodes and cannot reach Slurm (is SLURM_CONF "
                  f"set? is slurmctld running?): {exc.message}", file=sys.stderr)
            return 2
        echo = (lambda line: print(line, file=sys.stderr, flush=True)) if not args.quiet else None
        runs = SlurmRuns(scratch, args.partition, am_settings, selection, BarrierConfig.load(args.config),
                         echo=echo, client=client)
        runs.prefix_lines = len(jobs) > 1
        try:
            work_dirs = [scratch if len(jobs) == 1 else scratch / f"{k}-{job.name}" for k, job in enumerate(jobs)]
            for job, work_dir in zip(jobs, work_dirs):
                runs.submit(job, work_dir, "default")
            asked = _wait_for_asks(runs, commands, lock, len(jobs))
        finally:
            with runs.clock.lock:
                runs.close()
            runs.shutdown()
        with lock:
            shown = list(commands)
        print(render_dry_run(shown, str(scratch), str(base.resolve()), client))
        if not asked:
            print(f"gangmaster run: --dry-run: not every job asked for a gang within {DRY_RUN_WAIT_S:g} s "
                  "(see the lines above)", file=sys.stderr)
            return 1
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _wait_for_asks(runs, commands: list[list[str]], lock: threading.Lock, jobs: int) -> bool:
    """Wait until every job's AM has asked for a gang (or every run ended), then a moment
    for gangs asked right after; whether every job asked."""
    deadline = time.monotonic() + DRY_RUN_WAIT_S
    while time.monotonic() < deadline:
        with lock:
            apps = {c[2].split("=", 1)[1].rsplit("-", 1)[0] for c in commands}
        if len(apps) >= jobs:
            time.sleep(DRY_RUN_SETTLE_S)
            return True
        if all(run.done for run in runs.runs):
            return False
        time.sleep(0.05)
    return False


def render_dry_run(commands: list[list[str]], scratch: str, base: str, client) -> str:
    """The commands, one option group a line (the heterogeneous job's components each on
    its own after ``:``), the job script after them; the scratch folder's paths as the
    work folder's."""
    def shown(text: str) -> str:
        return text.replace(scratch, base)

    lines = [f"# --dry-run: nothing submitted; {len(commands)} sbatch command(s) a run into {base} would run"]
    for command in commands:
        parts, current = [], []
        for arg in command:
            if arg == ":":
                parts.append(current)
                current = []
            else:
                current.append(arg)
        parts.append(current)
        script = parts[-1][-2:]          # the job script and its argument close the last component
        parts[-1] = parts[-1][:-2]
        components = len(parts)
        lines.append(f"# {command[2].split('=', 1)[1]}: a heterogeneous job of {components} component(s), one per host"
                     if components > 1 else f"# {command[2].split('=', 1)[1]}: one host")
        body = [shlex.join(parts[0])] + [": " + shlex.join(p) for p in parts[1:]] + [shlex.join(script)]
        lines.append(shown(" \\\n    ".join(body)))
    launcher = client.state_dir / "launcher.sh"
    if launcher.is_file():
        lines.append(f"# the job script, {shown(str(launcher))} (the batch step: it starts each task as a step):")
        lines += [shown(line) for line in launcher.read_text().splitlines()]
    return "\n".join(lines)
