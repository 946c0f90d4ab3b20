"""A whole Slurm cluster on this machine, written from a gangmaster cluster file.

``gangmaster slurm local-cluster start --cluster FILE --work-dir DIR`` writes
``DIR/slurm.conf`` and ``DIR/gres.conf`` (:func:`slurm_conf`, :func:`gres_conf`), starts
one ``slurmctld`` and one ``slurmd`` per node of the file on 127.0.0.1 (where Slurm can
be bound there: :func:`loopback_address`), each on its own port, and waits until every
node is idle. ``start`` on a cluster some of whose daemons died starts those again,
keeping its jobs (:meth:`LocalCluster.restart`). Each GPU is declared as its own GRES type
(:mod:`.names`) backed by a stand-in device file (a character device like
``/dev/null``), so jobs can name exact GPUs and get ``CUDA_VISIBLE_DEVICES`` as a real
node would set it. Racks, labels and topology presets become node features.

It is for trying gangmaster on Slurm and for tests, not for production: no munge
(``AuthType=auth/none``), every daemon runs as root (so it must be reachable from this
machine only), nodes' CPUs and memory are taken as declared
(``SlurmdParameters=config_overrides``). A real cluster's admin writes
the same GRES and features by hand (README: Slurm).
"""
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gangmaster.protocol.grpc_security import ListenError, check_bindable
from gangmaster.conf.fields import ConfigError
from gangmaster.conf.limits import (LOCAL_SLURM_MAX_NODES, LOCAL_SLURM_START_TIMEOUT_S,
                                    LOCAL_SLURMD_TIMEOUT_S)
from gangmaster.selectors.cluster import NodeSpec

from .listeners import is_loopback, listeners
from .names import features_of, per_gpu_type
from .slurm_json import SlurmJSONError, read_nodes

DEFAULT_CONTROLLER_PORT = 6820
DEFAULT_FIRST_SLURMD_PORT = 17000
PARTITION = "gangmaster"
STATE_FILE = "local-cluster.json"
REQUIRED_PROGRAMS = ("slurmctld", "slurmd", "sinfo", "scontrol", "squeue", "sbatch", "srun", "scancel")
INSTALL_HINT = "apt-get install slurm-wlm"
#: Where clients reach daemons that listen on every interface (:func:`loopback_address` found none to bind).
ANY_INTERFACE_ADDRESS = "127.0.0.1"


#: The longest path a Unix socket may have: sun_path holds 108 bytes, its NUL among them.
UNIX_SOCKET_PATH_MAX = 107
#: A job id of slurm.conf's default MaxJobId (67,108,863) and the batch step's id: the longest
#: name slurmstepd gives a step's socket in a node's spool folder is NODE_JOBID.STEPID.
_LONGEST_STEP = f"{67_108_863}.{4_294_967_291}"


class SlurmUnavailable(RuntimeError):
    """This machine cannot run a local Slurm cluster (not root, slurm-wlm missing)."""


def missing_requirements() -> str:
    """Why a local cluster cannot run here ("" when it can): it needs root and slurm-wlm."""
    missing = [p for p in REQUIRED_PROGRAMS if shutil.which(p) is None]
    if missing:
        return f"slurm-wlm not installed ({', '.join(missing)} not found): {INSTALL_HINT}"
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd starts every task's processes as root here)"
    return ""


@dataclass(frozen=True)
class Ports:
    controller: int = DEFAULT_CONTROLLER_PORT
    first_slurmd: int = DEFAULT_FIRST_SLURMD_PORT


@dataclass(frozen=True)
class Daemon:
    """One daemon of a local cluster, as ``local-cluster status`` shows it."""

    name: str                    # "slurmctld" or "slurmd -N <node>"
    port: int
    pid: int | None              # None: it does not run
    listens: tuple[str, ...]     # "127.0.0.1:6820": where it listens now

    @property
    def alive(self) -> bool:
        return self.pid is not None

    @property
    def exposed(self) -> tuple[str, ...]:
        """The addresses it listens on that other machines can reach."""
        return tuple(a for a in self.listens if not is_loopback(a.rpartition(":")[0].strip("[]")))


# ---------------------------------------------------------------- configuration
def loopback_address(host: str) -> str | None:
    """The loopback address Slurm's daemons can be bound to on this machine, or None.

    Slurm 22.05 has no option naming the address a daemon listens on: each listens on
    every interface, or, with ``CommunicationParameters=NoCtldInAddrAny,NoInAddrAny``,
    on the address this machine's own name (``gethostname()``) resolves to
    (``slurm_setup_addr`` in Slurm's ``slurm_protocol_api.c``), and so do srun's
    listeners. A slurmd calls srun back on the address srun's request came from: the
    name's address must be the one this machine's connections to it come from, i.e.
    127.0.0.1 (a name on 127.0.1.1, as Debian's ``/etc/hosts`` has it, is reached from
    127.0.0.1, and srun's steps would never start)."""
    try:
        address = socket.gethostbyname(host)
    except (OSError, UnicodeError):
        return None
    if not ipaddress.ip_address(address).is_loopback:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((address, 9))          # sends nothing: the kernel only picks the source address
        source = probe.getsockname()[0]
    return address if source == address else None


def slurm_conf(specs: list[NodeSpec], work_dir: Path, ports: Ports = Ports(), host: str | None = None,
               address: str | None = None, slurmd_timeout_s: int = LOCAL_SLURMD_TIMEOUT_S) -> str:
    """The ``slurm.conf`` of a local cluster holding ``specs``' nodes, everything under
    ``work_dir``. ``address``: the loopback address every daemon binds to (``host``'s,
    :func:`loopback_address`); None: they listen on every interface, reached at 127.0.0.1."""
    host = host or socket.gethostname()
    d = work_dir.resolve()
    if address:
        reach = address
        bind = ["# Every daemon listens on the address this machine's name resolves to, 127.0.0.1.",
                "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"]
    else:
        reach = ANY_INTERFACE_ADDRESS
        bind = [f"# WARNING: {host} does not resolve to 127.0.0.1: every daemon listens on every",
                "# interface, without authentication, and runs jobs as root (README: Slurm)."]
    lines = [
        "# Written by `gangmaster slurm local-cluster start`: a test cluster on one machine.",
        "ClusterName=gangmaster",
        *bind,
        f"SlurmctldHost={host}({reach})",
        f"SlurmctldPort={ports.controller}",
        "AuthType=auth/none",
        "CredType=cred/none",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "SlurmdParameters=config_overrides",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "GresTypes=gpu",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        # heterogeneous jobs start on a backfill pass: look every second, not every 30 s
        "SchedulerParameters=bf_interval=1,bf_resolution=1",
        "ReturnToService=2",
        f"SlurmdTimeout={slurmd_timeout_s}",
        "KillWait=2",
        "InactiveLimit=0",
        "MinJobAge=600",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "",
    ]
    for i, spec in enumerate(specs):
        node = [f"NodeName={spec.host}", f"NodeHostname={host}", f"NodeAddr={reach}",
                f"Port={ports.first_slurmd + i}", f"CPUs={max(1, int(spec.vcores))}",
                f"RealMemory={spec.memory_mb}"]
        if spec.gpus:
            node.append("Gres=" + ",".join(f"gpu:{per_gpu_type(spec.gpu_type, g)}:1" for g in range(spec.gpus)))
        features = features_of(spec.rack, spec.labels, spec.topology, spec.domains)
        if features:
            node.append("Feature=" + ",".join(features))
        lines.append(" ".join(node + ["State=UNKNOWN"]))
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def check_socket_room(specs: list[NodeSpec], work_dir: Path) -> None:
    """Refuse a work folder too deep for the step sockets slurmstepd makes in each node's
    spool folder: past :data:`UNIX_SOCKET_PATH_MAX` characters it cannot make one, and every
    job on that node fails at launch and is requeued, with nothing said but in slurmd's log."""
    longest = max((f"{work_dir.resolve()}/spool/{s.host}/{s.host}_{_LONGEST_STEP}" for s in specs), key=len)
    if len(longest) > UNIX_SOCKET_PATH_MAX:
        raise ConfigError("--work-dir", "", f"a folder whose path leaves room for Slurm's step sockets "
                          f"(at most {UNIX_SOCKET_PATH_MAX} characters: {longest} has {len(longest)}); "
                          f"choose a folder {len(longest) - UNIX_SOCKET_PATH_MAX} characters shorter",
                          str(work_dir))


def gres_conf(specs: list[NodeSpec], work_dir: Path) -> str:
    """``gres.conf``: one line per GPU of every node, its own type, its stand-in device file."""
    d = work_dir.resolve()
    lines = ["# Written by `gangmaster slurm local-cluster start`: each GPU its own GRES type."]
    for spec in specs:
        for g in range(spec.gpus):
            lines.append(f"NodeName={spec.host} Name=gpu Type={per_gpu_type(spec.gpu_type, g)} "
                         f"File={d}/dev/nvidia{g}")
    return "\n".join(lines) + "\n"


def check_specs(specs: list[NodeSpec], source: str) -> None:
    if len(specs) > LOCAL_SLURM_MAX_NODES:
        raise ConfigError(source, "nodeGroups", f"at most {LOCAL_SLURM_MAX_NODES} nodes for a local Slurm "
                                                f"cluster (one slurmd each; LOCAL_SLURM_MAX_NODES in "
                                                f"conf/limits.py), got {len(specs)}")


# ---------------------------------------------------------------------- running
class LocalCluster:
    """The local cluster whose files are in ``work_dir``."""

    def __init__(self, work_dir: str | Path):
        self.work_dir = Path(work_dir).resolve()

    @property
    def conf_path(self) -> Path:
        return self.work_dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """This process's environment pointed at the cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf_path)}

    def recorded(self) -> dict | None:
        """What `start` recorded of this cluster (its source, nodes, ports, address), or None."""
        try:
            return json.loads((self.work_dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None

    def start(self, specs: list[NodeSpec], ports: Ports = Ports(), source: str = "cluster file",
              slurmd_timeout_s: int = LOCAL_SLURMD_TIMEOUT_S, timeout_s: float = LOCAL_SLURM_START_TIMEOUT_S) -> None:
        """Write the configuration, start every daemon, wait until every node is idle.
        Raises :class:`SlurmUnavailable` (saying what is missing) or RuntimeError."""
        why = missing_requirements()
        if why:
            raise SlurmUnavailable(why)
        check_specs(specs, source)
        check_socket_room(specs, self.work_dir)
        if self.running_daemons():
            raise RuntimeError(f"a local Slurm cluster already runs from {self.work_dir}; "
                               f"`gangmaster slurm local-cluster stop --work-dir {self.work_dir}` first")
        host = socket.gethostname()
        address = loopback_address(host)
        _check_free([ports.controller, *range(ports.first_slurmd, ports.first_slurmd + len(specs))], address,
                    "choose others with --port / --slurmd-port")
        for sub in ("state", "spool", "run", "log", "dev"):
            (self.work_dir / sub).mkdir(parents=True, exist_ok=True)
        for sub in ("state", "spool"):   # a fresh cluster: no jobs of an earlier one
            shutil.rmtree(self.work_dir / sub)
            (self.work_dir / sub).mkdir()
        for g in range(max((s.gpus for s in specs), default=0)):
            device = self.work_dir / "dev" / f"nvidia{g}"
            if not device.exists():
                os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))   # a stand-in, like /dev/null
        self.conf_path.write_text(slurm_conf(specs, self.work_dir, ports, host, address,
                                             slurmd_timeout_s=slurmd_timeout_s))
        (self.work_dir / "gres.conf").write_text(gres_conf(specs, self.work_dir))
        (self.work_dir / STATE_FILE).write_text(json.dumps(
            {"source": source, "nodes": [s.host for s in specs], "controller_port": ports.controller,
             "first_slurmd_port": ports.first_slurmd, "address": address}, indent=2))
        try:
            self._daemon(["slurmctld", "-f", str(self.conf_path), "-c"], "slurmctld")
            for spec in specs:
                self.start_node(spec.host)
            self.wait_idle([s.host for s in specs], timeout_s)
        except BaseException:
            self.stop()   # nothing of a cluster that did not come up is left running
            raise

    def restart(self, timeout_s: float = LOCAL_SLURM_START_TIMEOUT_S) -> list[str]:
        """Start again the daemons of this cluster that do not run, with the configuration
        and state it has, and wait until every node answers; the daemons started.

        slurmctld starts without ``-c``: it recovers the jobs, nodes and reservations saved
        in ``DIR/state``, so jobs that ran on through its death carry on (a job started in
        the last seconds before it died may not be saved yet: Slurm requeues it). A
        slurmd started again takes back its node's running steps."""
        why = missing_requirements()
        if why:
            raise SlurmUnavailable(why)
        state = self.recorded()
        if state is None:
            raise RuntimeError(f"no local Slurm cluster in {self.work_dir} to start again")
        dead = [d for d in self.daemons() if not d.alive]
        _check_free([d.port for d in dead], state.get("address"),
                    f"free them, or `gangmaster slurm local-cluster stop --work-dir {self.work_dir}` and start afresh")
        for daemon in dead:
            if daemon.name == "slurmctld":
                self._daemon(["slurmctld", "-f", str(self.conf_path)], "slurmctld")
            else:
                self.start_node(daemon.name.removeprefix("slurmd -N "))
        self.wait_nodes(state["nodes"], timeout_s, lambda node: not node.lost, "answering")
        return [d.name for d in dead]

    def start_node(self, node: str) -> None:
        """Start (or start again) one node's slurmd."""
        self._daemon(["slurmd", "-f", str(self.conf_path), "-N", node], f"slurmd -N {node}")

    def _daemon(self, command: list[str], what: str) -> None:
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{what} did not start (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-500:]}; see {self.work_dir / 'log'}")

    def nodes(self) -> list:
        """The cluster's nodes as Slurm reports them (:func:`.slurm_json.read_nodes`)."""
        done = subprocess.run(["sinfo", "--json"], env=self.env, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"sinfo --json: {done.stderr.strip() or done.returncode}")
        return read_nodes(done.stdout)

    def wait_idle(self, hosts: list[str], timeout_s: float) -> None:
        self.wait_nodes(hosts, timeout_s, lambda node: node.idle, "idle")

    def wait_nodes(self, hosts: list[str], timeout_s: float, ready, what: str) -> None:
        """Wait until ``ready(node)`` holds for every node of ``hosts`` (``what`` says it)."""
        deadline = time.monotonic() + timeout_s
        last = "slurmctld did not answer"
        while time.monotonic() < deadline:
            try:
                states = {n.name: n for n in self.nodes()}
            except (RuntimeError, SlurmJSONError, subprocess.TimeoutExpired) as exc:
                last = str(exc)
            else:
                waiting = [h for h in hosts if h not in states or not ready(states[h])]
                if not waiting:
                    return
                last = ", ".join(f"{h} {'/'.join(states[h].states) if h in states else 'unknown'}"
                                 for h in waiting[:6])
            time.sleep(0.2)
        raise RuntimeError(f"the local Slurm cluster was not {what} after {timeout_s:g}s: {last}; "
                           f"see the logs in {self.work_dir / 'log'}")

    def daemons(self) -> list[Daemon]:
        """Every daemon of this cluster, slurmctld first, running or not (none when the
        folder holds no cluster)."""
        state = self.recorded()
        if state is None:
            return []
        run = self.work_dir / "run"
        wanted = [("slurmctld", "slurmctld", run / "slurmctld.pid", state["controller_port"])]
        wanted += [(f"slurmd -N {node}", "slurmd", run / f"slurmd-{node}.pid", state["first_slurmd_port"] + i)
                   for i, node in enumerate(state["nodes"])]
        listening = listeners(port for *_, port in wanted)
        daemons = []
        for name, program, pid_file, port in wanted:
            pid = _read_pid(pid_file)
            alive = pid is not None and _is_daemon(pid, program)
            listens = tuple(f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in listening.get(port, ()))
            daemons.append(Daemon(name, port, pid if alive else None, listens if alive else ()))
        return daemons

    def running_daemons(self) -> dict[str, int]:
        """Each daemon of this cluster that runs now, with its pid."""
        return {d.name: d.pid for d in self.daemons() if d.alive}

    def stop_node(self, node: str) -> int | None:
        """Kill one node's slurmd (SIGKILL, as when a machine dies); its pid, or None."""
        path = self.work_dir / "run" / f"slurmd-{node}.pid"
        pid = _read_pid(path)
        if pid is None or not _is_daemon(pid, "slurmd"):
            return None
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self, grace_s: float = 10.0) -> list[str]:
        """Cancel every job, then stop every daemon (SIGTERM, SIGKILL after ``grace_s``);
        the daemons that were running."""
        daemons = self.running_daemons()
        if "slurmctld" in daemons:
            subprocess.run(["scancel", "--full", "--quiet", "--partition", PARTITION], env=self.env,
                           capture_output=True, timeout=30)
            self._wait_no_jobs(grace_s)
        for pid in daemons.values():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        for pid in daemons.values():
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        strays = self._stray_step_daemons()
        for pid in [*strays, *_descendants(strays)]:   # the jobs' processes too: no scancel reached them
            try:                                      # when slurmctld was dead
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return sorted(daemons)

    def _stray_step_daemons(self) -> list[int]:
        """The slurmstepd processes this cluster's nodes left behind. A node whose slurmd was
        killed (a simulated node failure) leaves its steps' slurmstepd running, never told
        that Slurm ended their job; each works in the cluster's folder."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if (entry / "comm").read_text().strip() != "slurmstepd":
                    continue
                cwd = os.readlink(entry / "cwd").removesuffix(" (deleted)")
            except OSError:
                continue
            if Path(cwd) == self.work_dir or self.work_dir in Path(cwd).parents:
                found.append(int(entry.name))
        return found

    def _wait_no_jobs(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = subprocess.run(["squeue", "-h", "-t", "PD,R,CG,CF,S", "-o", "%i"], env=self.env,
                                  capture_output=True, text=True, timeout=30)
            if done.returncode != 0 or not done.stdout.strip():
                return
            time.sleep(0.2)

    def status(self) -> dict:
        """Each daemon, running or not, and where it listens; each node's state (when
        slurmctld runs), for ``local-cluster status``."""
        state = self.recorded()
        daemons = self.daemons()
        out = {"work_dir": str(self.work_dir), "configured": state is not None,
               "slurm_conf": str(self.conf_path),
               "daemons": [{"name": d.name, "running": d.alive, "pid": d.pid, "port": d.port,
                            "listens": list(d.listens)} for d in daemons],
               "nodes": {}}
        if daemons and daemons[0].alive:
            try:
                out["nodes"] = {n.name: "/".join(n.states) for n in self.nodes()}
            except (RuntimeError, SlurmJSONError, subprocess.TimeoutExpired) as exc:
                out["error"] = str(exc)
        return out


def _check_free(ports: list[int], address: str | None, hint: str) -> None:
    """Raise RuntimeError naming the ``ports`` a daemon could not listen on now, on
    ``address`` (None: every interface)."""
    taken = []
    for port in ports:
        try:
            check_bindable(address or "0.0.0.0", port)
        except ListenError:
            taken.append(port)
    if taken:
        raise RuntimeError(f"port(s) {', '.join(map(str, taken))} already in use on {address or 'this machine'}: "
                           f"{hint}")


def _descendants(roots: list[int]) -> list[int]:
    """Every process below ``roots`` (their children, the children's, ...), now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(roots)
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:   # a zombie child of ours is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _is_daemon(pid: int, program: str) -> bool:
    """The pid is alive and runs ``program`` (a pid file can outlive its daemon, its pid reused)."""
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return False
    return name == program and _alive(pid)
