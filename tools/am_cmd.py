"""``gangmaster am --rm HOST:PORT JOB.yaml``: the ApplicationMaster as a process of its own,
driving a separate ``gangmaster rm serve`` over gRPC (YARN's shape: the RM and the AM are
different processes).

This process submits the application, runs the AM on a real-time heartbeat and serves
the gang's barriers (a gRPC coordinator on this machine); the RM's NodeManager starts
the tasks as processes on the RM's machine (:class:`~gangmaster.tools.job_runner.RemoteRuns`).
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from gangmaster.tools.arg_types import address
from gangmaster.tools.rm_cmd import add_client_security
from gangmaster.tools.run_cmd import add_am_options


def add_parser(sub):
    parser = sub.add_parser(
        "am", help="run one job's ApplicationMaster against a running `gangmaster rm serve`",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a job (OpenPAI v2 YAML, see conf/jobs/README.md) through an ApplicationMaster in this "
                    "process, on a ResourceManager in another: `gangmaster rm serve`, reached over gRPC at "
                    "--rm HOST:PORT (the address it printed: 'listening on HOST:PORT'). The AM submits the "
                    "application, places every gang all-or-nothing, asks the RM for every instance, starts "
                    "them together, restarts a gang when a task fails, and prints where every task ran, each "
                    "attempt, and the outcome.",
        epilog="What it needs: a `gangmaster rm serve` running and reachable (start it first; with its "
               "--token-file, pass the same file here, and with TLS its certificate or CA as --tls-ca). "
               "The tasks are real processes the RM starts on its machine; they reach this AM's barrier "
               "coordinator, which listens on this machine (barrier: section of --config), so run both on "
               "one machine or make that address reachable from the RM's.\n\n"
               "The work folder (--work-dir) holds the job's identity (its spec and the RM's nodes), the "
               "AM's journal and logs, and the tasks' outputs (output/). As with `gangmaster run`: a folder "
               "of another job is refused; when the job's run there finished, it is reported and not run "
               "again; when that run was interrupted, a new application resumes it (the attempts that were "
               "running start again as new attempts). When the RM gives the application a new AM attempt "
               "(`gangmaster rm fault kill_am`), a new AM starts in this process and recovers "
               "the job from the journal.\n\n"
               "SIGTERM or Ctrl-C kills the application at the RM, which stops its tasks, and then this "
               "process exits with the report (saying so when the RM could not be told). An AM killed with "
               "kill -9 cannot do that: its tasks run on at the RM. Run the same command again into its work "
               "folder: it kills that application at the RM and starts the job's next attempts once every one "
               "of its tasks has stopped.\n\n"
               "Exit status: 0 the job succeeded; 1 it failed, was killed or did not finish (--timeout, or "
               "the RM no longer knows its application: an RM restarted without --state); "
               "2 bad input (the message names the file and field), a work folder of another job, or an "
               "RM that cannot be reached or refuses the call (wrong token, unknown queue); 130 / 143 "
               "interrupted by Ctrl-C / SIGTERM, after the application was killed at the RM.")
    parser.add_argument("job", help="job file")
    parser.add_argument("--rm", required=True, type=address, metavar="HOST:PORT",
                        help="address of `gangmaster rm serve` (what it printed after 'listening on')")
    add_client_security(parser)
    parser.add_argument("--queue", default="default", help="the RM queue to submit to (default: default)")
    parser.add_argument("--work-dir", help="folder for the journal, logs and task outputs (default: "
                                           "./gangmaster-runs/<job>-<n>, a new one each run); a folder holding "
                                           "an earlier run of the same job is resumed, or reported when that "
                                           "run finished")
    add_am_options(parser, metrics_port_note="",
                   timeout_help="give up after this many seconds: the application is killed at the RM "
                                "(default 3600)")
    parser.set_defaults(func=_am)
    return parser


def _am(args) -> int:
    from gangmaster.am.barrier.config import BarrierConfig
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.protocol.rm_client_grpc import GrpcRMClient
    from gangmaster.protocol.rm_protocol import RMError
    from gangmaster.selectors.selector import selector_classes
    from gangmaster.tools.job_runner import RemoteRuns
    from gangmaster.tools.rm_cmd import client_security
    from gangmaster.tools.rmsim.control import SimulatorControl
    from gangmaster.tools.run_cmd import am_and_selection_settings, new_work_dir, print_metrics_url, print_reports

    am_settings, selection = am_and_selection_settings(args)
    barrier_config = BarrierConfig.load(args.config)
    job = load_job(args.job, selectors=list(selector_classes()))
    security = client_security(args)
    # The tasks start in the RM's folder: every path they are given must be absolute.
    base = (Path(args.work_dir) if args.work_dir else new_work_dir(job.name)).resolve()
    echo = None if args.quiet or args.json else (lambda line: print(line, flush=True))

    with GrpcRMClient(args.rm, security=security) as rm:
        try:
            SimulatorControl(rm).ping()   # `rm serve` answers, and takes this token
        except RMError as exc:
            print(f"gangmaster am: cannot use the RM at {args.rm}: {exc.message} (is `gangmaster rm serve` "
                  f"running there, with this --token-file / --tls-ca?)", file=sys.stderr)
            return 2
        runs = RemoteRuns(rm, am_settings, selection, barrier_config=barrier_config, echo=echo)
        runs.cluster_name = f"the RM at {args.rm}"
        interrupted = None
        finished = False
        try:
            runs.check_work_dir(job, base)
            runs.submit(job, base, args.queue)
            print_metrics_url(runs, args.json)
            finished = runs.run(args.timeout)
        except KeyboardInterrupt:
            interrupted = signal.SIGINT
        except RMError as exc:
            print(f"gangmaster am: the RM at {args.rm} refused the job: {exc.message}", file=sys.stderr)
            return 2
        finally:
            runs.shutdown()
            interrupted = interrupted or runs.interrupted
    print_reports(runs, base, args.json)
    if interrupted is not None:
        print(f"gangmaster am: interrupted by {interrupted.name}; {_at_the_rm(runs)}", file=sys.stderr)
        return 128 + interrupted
    if runs.failure is not None:
        print(f"gangmaster am: {runs.failure}; {_at_the_rm(runs)}", file=sys.stderr)
        return 1
    if not finished:
        print(f"gangmaster am: stopped before the job finished (--timeout); {_at_the_rm(runs)}", file=sys.stderr)
        return 1
    return 0 if all(r.outcome == "succeeded" for r in runs.runs) else 1


def _at_the_rm(runs) -> str:
    """What became of an application the run ended before it was done: killed at the RM
    (which stops its tasks), or not, and why (:attr:`RemoteRuns.not_killed`)."""
    if not runs.not_killed:
        return "the application was killed at the RM, which stops its tasks"
    return "; ".join(f"could not kill {app_id} at the RM ({why})" for app_id, why in runs.not_killed.items())
