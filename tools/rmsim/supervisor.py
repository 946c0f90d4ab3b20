"""The supervisor of one container's processes: why nothing a task starts outlives it.

The process NodeManager starts every container as::

    python -m gangmaster.tools.rmsim.supervisor --exit-file F --grace S [--lifeline FD] -- COMMAND...

in a new session (so the supervisor leads a session and a process group whose
id is its pid), and the supervisor runs COMMAND as its child in that group. It

* is a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): whatever the task leaves
  behind — a background child, even one that left the group with ``setsid`` —
  becomes the supervisor's child when its own parent dies, so nothing escapes;
* when COMMAND exits, stops everything COMMAND left behind (SIGTERM, then SIGKILL
  after the grace period), reaps it all, and only then writes COMMAND's exit code
  to the exit file and exits with it: by the time the RM sees the container end
  and frees its GPUs, its processes are gone;
* on SIGTERM, SIGINT or SIGHUP (the NodeManager stops the container) stops
  COMMAND and everything it started the same way;
* starts COMMAND with SIGUSR1 ignored: the preemption notice's signal reaches a task
  that handles it and ends none that does not (nor a shell around it);
* with ``--lifeline FD`` — the read end of a pipe whose write end only the process
  that started the supervisor holds — does the same when that process dies,
  however it dies: on ``kill -9`` no handler runs, but the kernel closes the pipe.
  (Unlike ``PR_SET_PDEATHSIG``, this fires when the *process* dies, not when the
  thread that happened to start the supervisor ends.)
* sets ``PR_SET_PDEATHSIG`` = SIGKILL on COMMAND, so a supervisor killed with
  ``kill -9`` takes COMMAND with it; what COMMAND started is then found by its
  process group and session and killed by the NodeManager before it frees the
  container's resources.

The exit code follows the shell's convention: a COMMAND killed by signal N exits
128 + N. The supervisor's own notes go to the task's log, prefixed ``gangmaster:``.
Linux only (prctl and /proc); standard library only, so it starts in milliseconds.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import select
import signal
import sys
import time

from .processes import processes, send

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: While stopping, how often newly orphaned processes are looked for (seconds).
RESCAN_S = 0.05
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def _note(message: str) -> None:
    print(f"gangmaster: {message}", file=sys.stderr, flush=True)


class Supervisor:
    """Runs COMMAND to its end, then stops what is left; see the module's docstring.
    Needs to lead a session of its own: everything in it is its to stop."""

    def __init__(self, command: list[str], exit_file: str, grace_s: float, lifeline: int | None):
        self.command, self.exit_file, self.grace_s, self.lifeline = command, exit_file, grace_s, lifeline
        self.me = os.getpid()
        self.session = os.getsid(0)
        if self.session != self.me:   # everything in its session is the supervisor's to stop
            raise RuntimeError("the supervisor must lead a session of its own (see main())")
        self.main_pid = 0
        self.main_status: int | None = None     # COMMAND's wait status, once reaped
        self.stop_reason = ""                   # why everything must stop now ("" while it need not)
        self.childless = False
        self._wake_r, self._wake_w = os.pipe()

    # ------------------------------------------------------------ the whole life
    def run(self) -> int:
        self._install_handlers()
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.main_pid = self._spawn()
        while self.main_status is None and not self.stop_reason:
            self._reap()
            if self.main_status is None and not self.stop_reason:
                self._wait(None)
        if self.stop_reason:
            _note(f"stopping the task: {self.stop_reason}")
        self._stop_everything()
        code = self._exit_code()
        self._write_exit_file(code)
        return code

    def _install_handlers(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self._wake_w)      # a signal makes select() below return
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_stop_signal)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def _on_stop_signal(self, signum, _frame) -> None:
        self.stop_reason = self.stop_reason or f"{signal.Signals(signum).name} received"

    def _spawn(self) -> int:
        """Fork and exec COMMAND (this process has one thread, so fork is safe)."""
        parent = os.getpid()
        pid = os.fork()
        if pid:
            return pid
        try:
            # As subprocess does: Python ignores SIGPIPE and SIGXFSZ, and exec keeps what is ignored.
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            # The preemption notice's signal (the NodeManager's notify_preemption) is ignored
            # unless a task handles it: exec keeps it ignored, so a shell wrapping the task
            # does not die of it, while a program that installs a handler gets it.
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:          # the supervisor died before the line above
                os._exit(128 + signal.SIGKILL)
            os.execvp(self.command[0], self.command)
        except OSError as exc:
            _note(f"cannot start {self.command[0]!r}: {exc.strerror}")
        os._exit(127)

    # ------------------------------------------------------------ waiting
    def _wait(self, timeout: float | None) -> None:
        """Until a signal arrives, the lifeline breaks, or ``timeout`` passes."""
        watched = [self._wake_r] + ([self.lifeline] if self.lifeline is not None else [])
        readable, _, _ = select.select(watched, [], [], timeout)
        if self._wake_r in readable:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        if self.lifeline is not None and self.lifeline in readable and not os.read(self.lifeline, 512):
            os.close(self.lifeline)
            self.lifeline = None
            self.stop_reason = self.stop_reason or "the process that started it has ended"

    def _reap(self) -> None:
        """Collect every child that has ended (COMMAND's status is kept)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.childless = True
                return
            if pid == 0:
                return
            if pid == self.main_pid:
                self.main_status = status

    # ------------------------------------------------------------ stopping
    def _stop_everything(self) -> None:
        """SIGTERM to every process left, SIGKILL after the grace period, until none is left."""
        left_behind = self.main_status is not None and not self.stop_reason
        kill_at = time.monotonic() + self.grace_s
        termed: set[int] = set()
        noted = False
        while True:
            self._reap()
            if self.childless:
                return
            targets = self._targets()
            if left_behind and targets and not noted:
                _note(f"the task ended and left {len(targets)} process(es) behind; stopping them")
                noted = True
            if time.monotonic() >= kill_at:
                send(targets, signal.SIGKILL)
            else:
                send([p for p in targets if p not in termed], signal.SIGTERM)
                termed.update(targets)
            self._wait(RESCAN_S)

    def _targets(self) -> list[int]:
        """Every process of this session, and every child (an orphan that had left the session)."""
        return [p.pid for p in processes() if p.pid != self.me and (p.sid == self.session or p.ppid == self.me)]

    def _exit_code(self) -> int:
        status = self.main_status
        if status is None:                      # unreachable: every child is reaped by now
            return 1
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)

    def _write_exit_file(self, code: int) -> None:
        tmp = self.exit_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{code}\n")
        os.replace(tmp, self.exit_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gangmaster.tools.rmsim.supervisor",
                                     description="Run COMMAND and make sure nothing it starts outlives it.")
    parser.add_argument("--exit-file", required=True, help="where COMMAND's exit code is written at the end")
    parser.add_argument("--grace", type=float, default=2.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("--lifeline", type=int, help="fd of a pipe's read end: stop everything when it closes")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no COMMAND to run")
    if args.lifeline is not None:
        os.set_inheritable(args.lifeline, False)   # COMMAND must not keep the pipe (nor learn of it)
    if os.getsid(0) != os.getpid():
        # Everything in its session is the supervisor's to stop: it must be a session of its own.
        try:
            os.setsid()
        except PermissionError:
            parser.error("cannot lead a session of its own; start it in a new session (setsid)")
    return Supervisor(command, args.exit_file, args.grace, args.lifeline).run()


if __name__ == "__main__":
    sys.exit(main())
