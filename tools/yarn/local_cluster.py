"""A whole YARN cluster on this machine, from Apache Hadoop's own jars and a gangmaster cluster file.

``gangmaster yarn local-cluster start --cluster FILE --work-dir DIR`` resolves the jars of
the checked-in ``pom.xml`` (Hadoop 3.4.2 by default) with ``mvn dependency:copy-dependencies``
into a cache folder, writes one configuration folder per daemon under ``DIR/conf/``, starts
one ResourceManager and one NodeManager per node of the file as plain ``java`` processes
(their main classes: no Hadoop tarball, no shell scripts), and waits until the RM's REST API
lists every NodeManager RUNNING.

What the configuration says (:func:`yarn_site`):

* everything listens on 127.0.0.1, each daemon on its own ports (:class:`Ports`); the
  NodeManager's default ``0.0.0.0:0`` is replaced, so a restarted NM keeps its node id;
* ``yarn.scheduler.include-port-in-node-name``: three NMs on one host are three nodes,
  ``localhost:PORT``, so an ask can name exactly one of them;
* ``yarn.io/gpu`` is a countable resource type, each NM declaring its node's GPU count
  from the cluster file, and so is each GPU by its index, ``gangmaster.io/gpu-<i>`` (1 on a
  node that has GPU ``i``): an ask names the GPUs the AM chose, so YARN never gives one GPU
  to two applications and its node report says which are taken (:func:`resource_types`);
  no GPU plugin runs (nothing pins devices: the AM exports
  ``CUDA_VISIBLE_DEVICES`` itself); memory and vcores as declared;
* the capacity scheduler with the DominantResourceCalculator (GPUs count), one queue
  ``default`` or the queues of a gangmaster queue file (:func:`queue_capacities`); short
  NM/AM liveness expiries so a lost node or AM shows in seconds.

It is for trying gangmaster on YARN and for tests, not for production: no security
(``simple``; YARN still demands token SASL on its AM and NM ports), containers run as
this user with the DefaultContainerExecutor, resources are taken as declared.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from gangmaster.selectors.cluster import NodeSpec
from gangmaster.tools.rmsim.queues import UNLIMITED

DEFAULT_HADOOP_VERSION = "3.4.2"
#: the versions this pom was checked with; another may be given but is untried
KNOWN_HADOOP_VERSIONS = ("3.4.2", "3.5.0")
POM = Path(__file__).with_name("pom.xml")
STATE_FILE = "local-cluster.json"
RM_MAIN = "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager"
NM_MAIN = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"
#: Hadoop 3.4's web apps (Guice, Jersey 1) reflect into the JDK: Java 17 must open these
_OPENS = ("java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
          "java.util.concurrent", "java.util.concurrent.atomic", "java.util.regex", "sun.nio.ch", "sun.net.dns",
          "sun.net.util")
JVM_OPTIONS = ("-Xmx384m", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
               *(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in _OPENS))
GPU = "yarn.io/gpu"
#: one countable resource per GPU index: ``gangmaster.io/gpu-0`` ... (the YARN client reads them)
GPU_INDEX_PREFIX = "gangmaster.io/gpu-"


def resource_types(specs: list[NodeSpec]) -> str:
    """``yarn.resource-types``: GPUs counted, and each GPU index up to the largest node's."""
    return ",".join([GPU, *(f"{GPU_INDEX_PREFIX}{i}" for i in range(max((s.gpus for s in specs), default=0)))])
HOST = "127.0.0.1"
START_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0
LOG_TAIL_LINES = 15


class YarnUnavailable(RuntimeError):
    """This machine cannot run a local YARN cluster: java or mvn missing, Maven Central unreachable."""


class ClusterStartError(RuntimeError):
    """A daemon died or never registered; the message names it and ends with its log's tail."""


@dataclass(frozen=True)
class Ports:
    """The ports of the cluster: the RM's five from ``rm``, each NM's three from ``first_nm`` on, ten apart."""

    rm: int = 18030
    first_nm: int = 18100

    @property
    def scheduler(self) -> int:
        return self.rm

    @property
    def tracker(self) -> int:
        return self.rm + 1

    @property
    def client(self) -> int:
        return self.rm + 2

    @property
    def admin(self) -> int:
        return self.rm + 3

    @property
    def web(self) -> int:
        return self.rm + 8

    def nm(self, index: int) -> tuple[int, int, int]:
        """NM ``index``'s RPC, localizer and web ports."""
        base = self.first_nm + 10 * index
        return base, base + 1, base + 2


# ---------------------------------------------------------------- jars
def missing_requirements() -> str:
    """Why a local cluster cannot run here ("" when it can, as far as programs go)."""
    missing = [p for p in ("java", "mvn") if shutil.which(p) is None]
    if missing:
        return (f"{' and '.join(missing)} not found: a local YARN cluster needs a JDK (17) and Maven "
                f"(apt-get install openjdk-17-jdk-headless maven)")
    return ""


def default_cache_dir(version: str) -> Path:
    base = os.environ.get("GANGMASTER_YARN_CACHE") or Path.home() / ".cache" / "gangmaster"
    return Path(base) / f"yarn-{version}"


def ensure_jars(version: str = DEFAULT_HADOOP_VERSION, cache_dir: Path | None = None,
                timeout_s: float = 900.0) -> Path:
    """The folder holding Hadoop ``version``'s RM and NM jars, resolved from Maven Central on first use."""
    why = missing_requirements()
    if why:
        raise YarnUnavailable(why)
    lib = (cache_dir or default_cache_dir(version)) / "lib"
    done = lib / ".resolved"
    stamp = f"{version} {hashlib.sha256(POM.read_bytes()).hexdigest()}\n"   # a changed pom resolves anew
    if done.exists() and done.read_text() == stamp:
        return lib
    shutil.rmtree(lib, ignore_errors=True)
    lib.mkdir(parents=True, exist_ok=True)
    command = ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", f"-Dhadoop.version={version}",
               f"-DoutputDirectory={lib}", "-DincludeScope=runtime"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise YarnUnavailable(f"mvn did not resolve Hadoop {version}'s jars within {timeout_s:.0f} s "
                              f"(is Maven Central reachable?)") from None
    if result.returncode != 0:
        raise YarnUnavailable(_maven_problem(result.stdout + result.stderr, version))
    done.write_text(stamp)
    return lib


def _maven_problem(output: str, version: str) -> str:
    """One line saying why mvn failed: unreachable Maven Central, an unknown version, or mvn's first error."""
    errors = [line.replace("[ERROR]", "").strip() for line in output.splitlines() if "[ERROR]" in line]
    text = " ".join(errors) or output.strip()
    if re.search(r"Unknown host|UnknownHostException|Connection refused|Network is unreachable|"
                 r"Connect to .* timed out|Could not transfer|transfer failed", text, re.I):
        return f"Maven Central cannot be reached (mvn: {_clip(errors[0] if errors else text)})"
    if re.search(r"Could not find artifact|could not be resolved", text, re.I):
        return f"Hadoop {version} could not be resolved from Maven Central (mvn: {_clip(text)})"
    return f"mvn failed resolving Hadoop {version}: {_clip(text)}"


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------- configuration
def _xml(properties: dict[str, object]) -> str:
    lines = ['<?xml version="1.0"?>', "<!-- Written by `gangmaster yarn local-cluster start`. -->", "<configuration>"]
    for key, value in properties.items():
        lines.append(f"  <property><name>{escape(key)}</name><value>{escape(str(value))}</value></property>")
    lines.append("</configuration>")
    return "\n".join(lines) + "\n"


#: how long the RM waits for a silent NodeManager (or AM) before it declares it lost (ms)
NM_EXPIRY_MS = 20000


def yarn_site(specs: list[NodeSpec], work_dir: Path, ports: Ports, node: int | None = None,
              nm_expiry_ms: int = NM_EXPIRY_MS) -> dict[str, object]:
    """The ``yarn-site.xml`` properties of the RM (``node`` None) or of NM number ``node``."""
    d = work_dir.resolve()
    props: dict[str, object] = {
        "yarn.resourcemanager.hostname": HOST,
        "yarn.resourcemanager.address": f"{HOST}:{ports.client}",
        "yarn.resourcemanager.scheduler.address": f"{HOST}:{ports.scheduler}",
        "yarn.resourcemanager.resource-tracker.address": f"{HOST}:{ports.tracker}",
        "yarn.resourcemanager.admin.address": f"{HOST}:{ports.admin}",
        "yarn.resourcemanager.webapp.address": f"{HOST}:{ports.web}",
        "yarn.resource-types": resource_types(specs),
        "yarn.scheduler.include-port-in-node-name": "true",
        "yarn.scheduler.minimum-allocation-mb": 64,
        "yarn.scheduler.maximum-allocation-mb": max(s.memory_mb for s in specs),
        "yarn.scheduler.maximum-allocation-vcores": max(_vcores(s) for s in specs),
        "yarn.resourcemanager.am.max-attempts": 4,
        "yarn.nm.liveness-monitor.expiry-interval-ms": nm_expiry_ms,
        "yarn.am.liveness-monitor.expiry-interval-ms": 20000,
        "yarn.resourcemanager.recovery.enabled": "false",
        "yarn.timeline-service.enabled": "false",
        "yarn.log-aggregation-enable": "false",
    }
    if node is not None:
        spec = specs[node]
        rpc, localizer, web = ports.nm(node)
        props.update({
            "yarn.nodemanager.hostname": HOST,
            "yarn.nodemanager.address": f"{HOST}:{rpc}",
            "yarn.nodemanager.localizer.address": f"{HOST}:{localizer}",
            "yarn.nodemanager.webapp.address": f"{HOST}:{web}",
            "yarn.nodemanager.local-dirs": str(d / "nm" / spec.host / "local"),
            "yarn.nodemanager.log-dirs": str(d / "nm" / spec.host / "logs"),
            "yarn.nodemanager.resource.memory-mb": spec.memory_mb,
            "yarn.nodemanager.resource.cpu-vcores": _vcores(spec),
            f"yarn.nodemanager.resource-type.{GPU}": spec.gpus,
            **{f"yarn.nodemanager.resource-type.{GPU_INDEX_PREFIX}{i}": 1 for i in range(spec.gpus)},
            "yarn.nodemanager.pmem-check-enabled": "false",
            "yarn.nodemanager.vmem-check-enabled": "false",
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": 99,
            "yarn.nodemanager.recovery.enabled": "false",
            "yarn.nodemanager.delete.debug-delay-sec": 600,
        })
    return props


def _vcores(spec: NodeSpec) -> int:
    return max(1, int(round(spec.vcores)))


#: the queue that takes the capacity the file's queues leave (YARN's capacities must add up to 100 %)
SPARE_QUEUE = "gangmaster-spare"


def queue_capacities(queues: list, specs: list[NodeSpec]) -> dict[str, tuple[float, float]]:
    """Each queue's capacity and maximum-capacity in percent of the cluster, from gangmaster's
    queue limits (:mod:`gangmaster.tools.rmsim.queues`).

    A queue's limit becomes its maximum-capacity: its dominant share of the cluster (the
    largest limit/total over memory, vcores and GPUs it limits; 100 % when it limits none).
    Guaranteed capacities must add up to 100 %: the maxima scaled down to do so when they
    add up to more; when they add up to less, a queue :data:`SPARE_QUEUE` that nobody
    submits to takes the rest. YARN applies a percentage to every resource alike: a queue
    limited in GPUs only is held to the same share of memory and vcores."""
    total = (sum(s.memory_mb for s in specs), sum(_vcores(s) for s in specs) * 1000, sum(s.gpus for s in specs))
    shares = {}
    for q in queues:
        fractions = [limit / whole for limit, whole in zip((q.max_mem, q.max_mvc, q.max_gpus), total)
                     if whole and limit < UNLIMITED]
        shares[q.name] = min(1.0, max(fractions, default=1.0))
    whole = sum(shares.values())
    if whole < 1.0 - 1e-9:
        shares[SPARE_QUEUE] = 1.0 - whole
        whole = 1.0
    out = {name: (round(100 * share / whole, 3), round(100 * share, 3)) for name, share in shares.items()}
    last = list(out)[-1]          # rounding: the last one makes the sum exactly 100
    out[last] = (round(100 - sum(c for name, (c, _) in out.items() if name != last), 3), out[last][1])
    return out


def capacity_scheduler(queues: list | None = None, specs: list[NodeSpec] | None = None) -> dict[str, object]:
    """``capacity-scheduler.xml``: one queue ``default`` (no ``queues``), or the queues of a
    gangmaster queue file (:func:`queue_capacities`); GPUs counted by the DominantResourceCalculator."""
    capacities = queue_capacities(queues, specs) if queues else {"default": (100.0, 100.0)}
    props: dict[str, object] = {"yarn.scheduler.capacity.root.queues": ",".join(capacities)}
    for name, (capacity, maximum) in capacities.items():
        props[f"yarn.scheduler.capacity.root.{name}.capacity"] = f"{capacity:g}"
        props[f"yarn.scheduler.capacity.root.{name}.maximum-capacity"] = f"{max(maximum, capacity):g}"
    props.update({
        "yarn.scheduler.capacity.maximum-am-resource-percent": 0.5,
        "yarn.scheduler.capacity.resource-calculator":
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
        "yarn.scheduler.capacity.node-locality-delay": 0,
    })
    return props


def core_site(work_dir: Path) -> dict[str, object]:
    return {"hadoop.tmp.dir": str(work_dir.resolve() / "tmp"),
            "hadoop.http.staticuser.user": _user(),
            "hadoop.security.authentication": "simple"}


LOG4J = """# Written by `gangmaster yarn local-cluster start`: everything to stdout (the daemon's log file).
log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.out
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
"""


def _user() -> str:
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name


def check_specs(specs: list[NodeSpec], source: str) -> None:
    from gangmaster.conf.fields import ConfigError
    if not specs:
        raise ConfigError(source, "nodeGroups", "at least one node")
    for i, spec in enumerate(specs):
        if spec.memory_mb < 256:
            raise ConfigError(source, f"node {spec.host}: memoryMB", "at least 256 for a YARN NodeManager",
                              spec.memory_mb)


# ---------------------------------------------------------------- the cluster
class LocalCluster:
    """The cluster whose configuration, state, logs and container dirs live in ``work_dir``."""

    def __init__(self, work_dir: str | Path):
        self.work_dir = Path(work_dir).resolve()
        #: the daemons this object started, by name: while starting, liveness is asked of
        #: them (a fresh child's /proc cmdline is still Python's until it execs java)
        self._procs: dict[str, subprocess.Popen] = {}
        self._scheduler = capacity_scheduler()

    @property
    def state_path(self) -> Path:
        return self.work_dir / STATE_FILE

    def state(self) -> dict | None:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None

    def _save(self, state: dict) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_path)

    @property
    def rm_web(self) -> str:
        state = self.state() or {}
        return f"http://{HOST}:{state.get('ports', asdict(Ports()))['rm'] + 8}"

    def start(self, specs: list[NodeSpec], ports: Ports = Ports(), lib: Path | None = None,
              version: str = DEFAULT_HADOOP_VERSION, timeout_s: float = START_TIMEOUT_S,
              progress=lambda line: None, source: str = "cluster file", queues: list | None = None,
              nm_expiry_ms: int = NM_EXPIRY_MS) -> dict:
        """Write the configuration, start the RM and one NM per node, wait for every NM RUNNING.
        ``nm_expiry_ms``: how long a silent NodeManager lasts before the RM declares its node LOST."""
        check_specs(specs, source)
        if self.running():
            raise ClusterStartError(f"a local YARN cluster already runs from {self.work_dir} "
                                    f"(stop it first: gangmaster yarn local-cluster stop --work-dir {self.work_dir})")
        lib = lib or ensure_jars(version)
        _check_ports_free(ports, len(specs))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "logs").mkdir(exist_ok=True)
        daemons: dict[str, dict] = {}
        from .target import spec_to_dict
        state = {"version": version, "lib": str(lib), "ports": asdict(ports), "source": source,
                 "daemons": daemons, "nodes": {}, "specs": [spec_to_dict(s) for s in specs]}
        self._scheduler = capacity_scheduler(queues, specs)
        self._write_conf("rm", yarn_site(specs, self.work_dir, ports, nm_expiry_ms=nm_expiry_ms))
        started = time.monotonic()
        daemons["resourcemanager"] = self._spawn("resourcemanager", "rm", RM_MAIN, lib)
        self._save(state)
        try:
            self._wait(lambda: self._rm_up(), "resourcemanager", timeout_s, started, progress,
                       f"the ResourceManager's REST API (http://{HOST}:{ports.web})")
            progress(f"resourcemanager up after {time.monotonic() - started:.1f} s; starting {len(specs)} NodeManager(s)")
            for i, spec in enumerate(specs):
                self._write_conf(spec.host, yarn_site(specs, self.work_dir, ports, node=i, nm_expiry_ms=nm_expiry_ms))
                daemons[f"nodemanager {spec.host}"] = self._spawn(f"nodemanager {spec.host}", spec.host, NM_MAIN, lib)
                state["nodes"][spec.host] = {"rpc_port": ports.nm(i)[0], "web_port": ports.nm(i)[2]}
            self._save(state)
            self._wait_nodes(specs, timeout_s, started, progress)
        except BaseException:
            self.stop()
            raise
        ids = self.node_ids()
        for host, node in state["nodes"].items():
            node["node_id"] = ids.get(node["rpc_port"])
        state["started_in_s"] = round(time.monotonic() - started, 1)
        self._save(state)
        return state

    def _write_conf(self, name: str, yarn: dict) -> None:
        conf = self.work_dir / "conf" / name
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "yarn-site.xml").write_text(_xml(yarn))
        (conf / "core-site.xml").write_text(_xml(core_site(self.work_dir)))
        (conf / "capacity-scheduler.xml").write_text(_xml(self._scheduler))
        (conf / "resource-types.xml").write_text(_xml({"yarn.resource-types": yarn["yarn.resource-types"]}))
        (conf / "log4j.properties").write_text(LOG4J)

    def _spawn(self, daemon: str, name: str, main: str, lib: Path) -> dict:
        conf = self.work_dir / "conf" / name
        log = self.work_dir / "logs" / f"{name}.log"
        command = ["java", *JVM_OPTIONS, f"-Dhadoop.log.dir={self.work_dir / 'logs'}",
                   f"-Dyarn.log.dir={self.work_dir / 'logs'}", f"-Dhadoop.home.dir={self.work_dir}",
                   "-cp", f"{conf}:{lib}/*", main]
        with open(log, "ab") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=self.work_dir, start_new_session=True,
                                    env={**os.environ, "HADOOP_CONF_DIR": str(conf)})
        self._procs[daemon] = proc
        return {"pid": proc.pid, "conf": str(conf), "log": str(log), "main": main}

    # -------------------------------------------------------------- waiting
    def _rm_up(self) -> bool:
        try:
            self.rest("/ws/v1/cluster/info")
            return True
        except OSError:
            return False

    def _wait(self, ready, daemon: str, timeout_s: float, started: float, progress, what: str) -> None:
        last = 0.0
        while not ready():
            self._check_alive(daemon)
            elapsed = time.monotonic() - started
            if elapsed > timeout_s:
                raise ClusterStartError(f"{daemon} did not answer on {what} within {timeout_s:.0f} s"
                                        + self._tail(daemon))
            if elapsed - last >= 10:
                progress(f"waiting for {daemon} ({elapsed:.0f} s)")
                last = elapsed
            time.sleep(0.5)

    def _wait_nodes(self, specs: list[NodeSpec], timeout_s: float, started: float, progress) -> None:
        ports = self.state()["nodes"]
        last_report = ""
        while True:
            states = self.node_states()
            waiting = [s.host for s in specs if states.get(ports[s.host]["rpc_port"]) != "RUNNING"]
            report = f"{len(specs) - len(waiting)}/{len(specs)} NodeManager(s) RUNNING"
            if not waiting:
                progress(f"{report} after {time.monotonic() - started:.1f} s")
                return
            for host in waiting:
                self._check_alive(f"nodemanager {host}")
            if time.monotonic() - started > timeout_s:
                host = waiting[0]
                raise ClusterStartError(
                    f"nodemanager {host} (127.0.0.1:{ports[host]['rpc_port']}) never came RUNNING within "
                    f"{timeout_s:.0f} s ({report}; waiting for {', '.join(waiting)})" + self._tail(f"nodemanager {host}"))
            if report != last_report:
                progress(f"{report} ({time.monotonic() - started:.0f} s)")
                last_report = report
            time.sleep(0.5)

    def _check_alive(self, daemon: str) -> None:
        proc = self._procs.get(daemon)
        if proc is not None and proc.poll() is not None:
            raise ClusterStartError(f"{daemon} exited during start" + self._tail(daemon))

    def _tail(self, daemon: str) -> str:
        info = (self.state() or {}).get("daemons", {}).get(daemon, {})
        try:
            lines = Path(info["log"]).read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        except (KeyError, OSError):
            return ""
        return f"; the tail of {info['log']}:\n" + "\n".join("  " + line for line in lines)

    # -------------------------------------------------------------- REST
    def rest(self, path: str, timeout_s: float = 5.0) -> dict:
        with urllib.request.urlopen(self.rm_web + path, timeout=timeout_s) as response:
            return json.loads(response.read())

    def node_reports(self) -> list[dict]:
        try:
            return (self.rest("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
        except (OSError, ValueError):
            return []

    def node_states(self) -> dict[int, str]:
        """Each registered NM's state, by its RPC port (the node id is ``host:port``)."""
        return {int(n["id"].rsplit(":", 1)[1]): n.get("state", "") for n in self.node_reports()}

    def node_ids(self) -> dict[int, str]:
        return {int(n["id"].rsplit(":", 1)[1]): n["id"] for n in self.node_reports()}

    # -------------------------------------------------------------- status and stop
    def daemons(self) -> dict[str, dict]:
        return dict((self.state() or {}).get("daemons", {}))

    def running(self) -> dict[str, int]:
        return {name: info["pid"] for name, info in self.daemons().items() if _is_ours(info["pid"], info["conf"])}

    def status(self) -> dict:
        state = self.state()
        if state is None:
            return {"configured": False, "work_dir": str(self.work_dir), "daemons": {}}
        daemons = {name: {"pid": info["pid"], "alive": _is_ours(info["pid"], info["conf"]), "log": info["log"]}
                   for name, info in state["daemons"].items()}
        stopped = bool(state.get("stopped"))
        out = {"configured": True, "work_dir": str(self.work_dir), "version": state.get("version"),
               "rm_web": self.rm_web, "rm_scheduler": f"{HOST}:{state['ports']['rm']}", "daemons": daemons,
               "stopped": stopped, "dead": [] if stopped else [name for name, d in daemons.items() if not d["alive"]]}
        if daemons.get("resourcemanager", {}).get("alive"):
            out["nodes"] = {n["id"]: n.get("state", "") for n in self.node_reports()}
        return out

    def stop_daemon(self, name: str, sig: int = signal.SIGKILL) -> int | None:
        """Signal one daemon by its recorded pid (e.g. kill -9 an NM to lose its node); the pid, or None."""
        info = self.daemons().get(name)
        if not info or not _is_ours(info["pid"], info["conf"]):
            return None
        os.kill(info["pid"], sig)
        return info["pid"]

    def restart_node(self, host: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start node ``host``'s NodeManager again (after :meth:`stop_daemon`): same configuration,
        same ports, so the RM takes it back as the same node; returns once it is RUNNING."""
        state = self.state()
        name = f"nodemanager {host}"
        if name not in state["daemons"]:
            raise ClusterStartError(f"no NodeManager for {host} in {self.work_dir}")
        if name in self.running():
            return
        state["daemons"][name] = self._spawn(name, host, NM_MAIN, Path(state["lib"]))
        self._save(state)
        port = state["nodes"][host]["rpc_port"]
        self._wait(lambda: self.node_states().get(port) == "RUNNING", name, timeout_s, time.monotonic(),
                   lambda line: None, "the ResourceManager's node list (RUNNING)")

    def stop(self, grace_s: float = STOP_GRACE_S) -> list[str]:
        """Stop every daemon of this cluster, NMs first: SIGTERM, then SIGKILL after ``grace_s``."""
        alive = self.running()
        order = sorted(alive, key=lambda name: name == "resourcemanager")
        for name in order:
            try:
                os.killpg(alive[name], signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        for name in order:
            info = self.daemons()[name]
            while _is_ours(info["pid"], info["conf"]) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _is_ours(info["pid"], info["conf"]):
                try:
                    os.killpg(info["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        state = self.state()
        if state is not None:
            self._save({**state, "stopped": True})
        return order


def _check_ports_free(ports: Ports, nodes: int) -> None:
    from gangmaster.protocol.grpc_security import ListenError, check_bindable
    wanted = [ports.scheduler, ports.tracker, ports.client, ports.admin, ports.web]
    for i in range(nodes):
        wanted += ports.nm(i)
    for port in wanted:
        try:
            check_bindable(HOST, port)
        except ListenError as exc:
            raise ClusterStartError(f"{exc} (needed by the local YARN cluster; choose others with --rm-port/"
                                    f"--nm-port)") from None


def _is_ours(pid: int, conf: str) -> bool:
    """``pid`` is alive (not a zombie) and is the java process started with conf folder ``conf``
    (a state file can outlive its daemons, their pids reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z" and any(arg.startswith(conf.encode() + b":") for arg in cmdline)
