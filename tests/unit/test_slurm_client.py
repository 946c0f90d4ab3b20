"""The Slurm client's bookkeeping against a fake Slurm (its commands answered in
process, in 22.05's JSON): a gang is one heterogeneous job, asks cancelled from a
pending job keep the rest of the gang together, refusals come back as rejections."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ResourceRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.domains import DomainAsk
from gangmaster.tools.slurm.client import SlurmRMClient, SlurmUnreachable

SINFO = (Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "sinfo-22.05-idle.json").read_text()


class FakeSlurm:
    """sinfo, squeue, sbatch and scancel of a cluster whose jobs the test moves by hand."""

    def __init__(self):
        self.jobs: dict[int, dict] = {}    # leader id -> {"components": [argv...], "state", "reason", "name"}
        self.refuse = ""                   # sbatch fails with this, when set
        self.cancelled: list[int] = []
        self.next_id = 100
        self.commands: list[list[str]] = []   # every command, as run
        self.config = "TopologyPlugin          = topology/default\n"   # what scontrol show config says

    def __call__(self, command, **_kw):
        self.commands.append(list(command))
        name = command[0]
        if name == "sinfo":
            return self._ok(SINFO)
        if name == "squeue":
            return self._ok(json.dumps({"jobs": [
                {"job_id": leader + k, "het_job_id": leader if len(job["components"]) > 1 else 0,
                 "het_job_offset": k, "name": job["name"], "job_state": job["state"], "state_reason": job["reason"],
                 "nodes": ""} for leader, job in self.jobs.items() for k in range(len(job["components"]))]}))
        if list(command[:3]) == ["scontrol", "show", "config"]:
            return self._ok(self.config)
        if name == "scancel":
            leader = int(command[1])
            self.cancelled.append(leader)
            self.jobs[leader]["state"] = "CANCELLED"
            return self._ok("")
        if name == "sbatch":
            if self.refuse:
                return subprocess.CompletedProcess(command, 1, "", f"sbatch: error: {self.refuse}\n")
            args = list(command[1:-2])
            components, current = [], []
            for arg in args:
                if arg == ":":
                    components.append(current)
                    current = []
                elif not arg.startswith(("--parsable", "--job-name", "--output", "--chdir", "--export",
                                         "--no-requeue", "--partition")):
                    current.append(arg)
            components.append(current)
            name = next(a.split("=", 1)[1] for a in args if a.startswith("--job-name="))
            leader = self.next_id
            self.next_id += 10
            self.jobs[leader] = {"components": components, "state": "PENDING", "reason": "Resources", "name": name}
            return self._ok(f"{leader}\n")
        raise AssertionError(f"unexpected command {command}")

    @staticmethod
    def _ok(out: str):
        return subprocess.CompletedProcess([], 0, out, "")


def ask(request_id: int, host: str, mask: int) -> ResourceRequest:
    return ResourceRequest(request_id, ResourceDescriptor(1024, 2, bin(mask).count("1"), mask), host=host,
                           relax_locality=False)


def client_and_app(tmp_path, **options):
    slurm = FakeSlurm()
    client = SlurmRMClient(tmp_path, run_command=slurm, **options)
    app = client.submit(ApplicationSubmission("gang"))
    client.register(app)
    return slurm, client, app


def test_a_gang_is_one_heterogeneous_job_granted_whole(tmp_path):
    slurm, client, app = client_and_app(tmp_path)
    asks = (ask(1, "dgx-000", 0b0001), ask(2, "dgx-001", 0b0110), ask(3, "dgx-000", 0b1000))
    response = client.allocate(AllocateRequest(app, 1, asks=asks))
    [(leader, job)] = slurm.jobs.items()
    first, second = job["components"]
    assert first == ["-N1", "-n1", "--cpus-per-task=4", "--mem=2048M", "--nodelist=dgx-000",
                     "--gres=gpu:V100_0:1,gpu:V100_3:1"]
    assert second[-2:] == ["--nodelist=dgx-001", "--gres=gpu:V100_1:1,gpu:V100_2:1"]
    assert not response.allocated
    assert {p.request_id: str(p.reason) for p in response.pending} == {
        r: f"Slurm job {leader} pending: Resources" for r in (1, 2, 3)}
    job["state"], job["reason"] = "RUNNING", "None"
    response = client.allocate(AllocateRequest(app, 1))
    granted = {c.request_id: (c.host, c.resource.gpu_mask) for c in response.allocated}
    assert granted == {1: ("dgx-000", 0b0001), 2: ("dgx-001", 0b0110), 3: ("dgx-000", 0b1000)}


def test_the_rest_of_a_cancelled_job_waits_for_the_gangs_next_asks(tmp_path):
    slurm, client, app = client_and_app(tmp_path)
    client.allocate(AllocateRequest(app, 1, asks=(ask(1, "dgx-000", 1), ask(2, "dgx-001", 1))))
    [first] = slurm.jobs
    response = client.allocate(AllocateRequest(app, 1, cancel=(1,)))   # the AM selects worker 1 again
    assert slurm.cancelled == [first] and len(slurm.jobs) == 1         # nothing asked alone
    assert [(p.request_id, "held back" in str(p.reason)) for p in response.pending] == [(2, True)]
    client.allocate(AllocateRequest(app, 1, asks=(ask(3, "dgx-000", 0b10),)))
    second = max(slurm.jobs)
    hosts = [c[-2] if c[-1].startswith("--gres") else c[-1] for c in slurm.jobs[second]["components"]]
    assert hosts == ["--nodelist=dgx-001", "--nodelist=dgx-000"]        # the held ask and the new one, one job
    response = client.allocate(AllocateRequest(app, 1, cancel=(2, 3)))
    assert not response.pending and slurm.cancelled == [first, second]


def test_a_refused_job_rejects_every_ask_of_it(tmp_path):
    slurm, client, app = client_and_app(tmp_path)
    slurm.refuse = "Batch job submission failed: Requested node configuration is not available"
    response = client.allocate(AllocateRequest(app, 1, asks=(ask(1, "dgx-000", 1 << 7), ask(2, "nowhere", 1))))
    reasons = {r.request_id: str(r.reason) for r in response.rejected}
    assert reasons[1] == ("Slurm refused the job: Batch job submission failed: Requested node configuration is "
                          "not available")
    assert reasons[2].startswith("unknown host 'nowhere'")


def test_a_gang_asking_a_share_of_a_gpu_is_rejected_whole_and_nothing_is_submitted(tmp_path):
    """Slurm's GRES are whole GPUs: a gang with a share of one is refused, every ask of it,
    saying why, and no job reaches Slurm."""
    slurm, client, app = client_and_app(tmp_path)
    share = ResourceRequest(2, ResourceDescriptor(1024, 1, gpu_mask=0b1, gpu_milli=250), host="dgx-000",
                            relax_locality=False)
    resp = client.allocate(AllocateRequest(app, 1, asks=(ask(1, "dgx-000", 0b10), share)))
    assert [j.request_id for j in resp.rejected] == [1, 2] and not resp.allocated and not slurm.jobs
    assert "a share of one GPU (gpu_milli=250) cannot be asked of it" in str(resp.rejected[1].reason)


UNCONFIGURED = ("scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
                "scontrol: error: fetch_config: DNS SRV lookup failed\n"
                "scontrol: error: _establish_config_source: failed to fetch config\n"
                "scontrol: fatal: Could not establish a configuration source\n")
DOWN = ("Slurmctld(primary) at vm is DOWN\n*****************************************\n"
        "** RESTORE SLURMCTLD DAEMON TO SERVICE **\n*****************************************\n")


@pytest.mark.parametrize("code, stdout, stderr, said", [       # what Slurm 22.05.8 answers
    (0, "Slurmctld(primary) at vm is UP\n", "", None),
    (1, DOWN, "", "Slurmctld(primary) at vm is DOWN"),
    (1, "", UNCONFIGURED, "scontrol: fatal: Could not establish a configuration source"),
    (1, "", "", "exit 1"),
], ids=["up", "controller down", "SLURM_CONF unset", "silent"])
def test_ping_says_the_line_of_slurms_answer_that_says_why_and_writes_nothing(tmp_path, code, stdout, stderr, said):
    commands = []

    def scontrol(command, **_kw):
        commands.append(command)
        return subprocess.CompletedProcess(command, code, stdout, stderr)

    client = SlurmRMClient(tmp_path / "state", run_command=scontrol)
    if said is None:
        client.ping()
    else:
        with pytest.raises(SlurmUnreachable) as raised:
            client.ping()
        assert raised.value.message == said
    assert commands == [("scontrol", "ping")]
    assert not (tmp_path / "state").exists()      # a run Slurm cannot take leaves no folder behind


def test_account_qos_and_time_go_once_before_the_first_component(tmp_path):
    """Slurm propagates --account, --partition, --qos and --time from the first component
    of a heterogeneous job to the others: given once, they hold for the whole gang."""
    options = ["--account=proj-7", "--qos=high", "--time=1-00:30:00"]
    slurm, client, app = client_and_app(tmp_path, sbatch_options=options)
    client.allocate(AllocateRequest(app, 1, asks=(ask(1, "dgx-000", 1), ask(2, "dgx-001", 1))))
    [sbatch] = [c for c in slurm.commands if c[0] == "sbatch"]
    first = sbatch.index("-N1")
    assert sbatch[first - 4:first] == ["--no-requeue", *options]
    assert sbatch.count(":") == 1 and all(sbatch.count(o) == 1 for o in options)


def test_no_options_given_none_added(tmp_path):
    slurm, client, app = client_and_app(tmp_path)
    client.allocate(AllocateRequest(app, 1, asks=(ask(1, "dgx-000", 1),)))
    [sbatch] = [c for c in slurm.commands if c[0] == "sbatch"]
    assert not [a for a in sbatch if a.startswith(("--account", "--qos", "--time", "--partition"))]


def test_a_dry_run_hands_over_the_sbatch_and_runs_nothing(tmp_path):
    shown = []
    slurm, client, app = client_and_app(tmp_path, sbatch_options=["--time=10"], dry_run=shown.append)
    response = client.allocate(AllocateRequest(app, 1, asks=(ask(1, "dgx-000", 1), ask(2, "dgx-001", 2))))
    read = {("sinfo", "--json"), ("scontrol", "show", "config")}   # the nodes and their switches
    assert {tuple(c[:3]) for c in slurm.commands} == read        # were read; nothing submitted
    [command] = shown
    assert command[0] == "sbatch" and "--time=10" in command and command.count(":") == 1
    assert not response.allocated and not response.rejected
    client.allocate(AllocateRequest(app, 1))                   # a job never submitted is not looked for
    assert {tuple(c[:3]) for c in slurm.commands} == read
    client.kill(app, "done")
    assert "scancel" not in [c[0] for c in slurm.commands]


@pytest.mark.parametrize("plugin, written, expected", [
    ("topology/tree", "SwitchName=leaf1 Nodes=dgx-000,cpu-000\nSwitchName=leaf2 Nodes=dgx-001\n"
                      "SwitchName=spine Switches=leaf[1-2]\n",
     {"cpu-000": (("leaf", "leaf1"), ("spine", "spine")), "dgx-000": (("leaf", "leaf1"), ("spine", "spine")),
      "dgx-001": (("leaf", "leaf2"), ("spine", "spine"))}),
    ("topology/default", "SwitchName=leaf1 Nodes=dgx-000\n", {"cpu-000": (), "dgx-000": (), "dgx-001": ()}),
    ("topology/tree", None, {"cpu-000": (), "dgx-000": (), "dgx-001": ()}),
], ids=["tree: its switches", "no topology plugin: none", "no topology.conf here (configless): none"])
def test_the_nodes_domains_are_the_switches_of_the_topology_conf_slurm_reads(tmp_path, plugin, written, expected):
    """Where `scontrol show config` says Slurm reads topology.conf (beside SLURM_CONF, with
    TopologyPlugin topology/tree or block), its switches are the nodes' network domains, read once."""
    conf = tmp_path / "etc" / "slurm.conf"
    conf.parent.mkdir()
    if written is not None:
        (conf.parent / "topology.conf").write_text(written)
    slurm = FakeSlurm()
    slurm.config = (f"Configuration data as of 2026-12-02T07:00:00\nSLURM_CONF              = {conf}\n"
                    f"TopologyParam           = (null)\nTopologyPlugin          = {plugin}\n")
    client = SlurmRMClient(tmp_path / "state", run_command=slurm)
    assert {n.host: n.domains for n in client.cluster_nodes()} == expected
    client.cluster_nodes()
    assert sum(list(c[:3]) == ["scontrol", "show", "config"] for c in slurm.commands) == 1


@pytest.mark.parametrize("domain,expected", [
    (DomainAsk("leaf", required=True), ["--switches=1"]),   # Slurm's own way to keep a job under one leaf
    (DomainAsk("leaf", required=False), []),                # preferred: the AM's placement alone
    (DomainAsk("spine", required=True), []),                # no sbatch option for a level above the leaf
    (DomainAsk("rack", required=True), []),
    (None, []),
])
def test_a_required_leaf_domain_asks_slurm_for_one_switch(tmp_path, domain, expected):
    slurm, client, app = client_and_app(tmp_path, sbatch_options=["--qos=high"])
    client.keep_in_domain(app, domain)
    client.allocate(AllocateRequest(app, 1, asks=(ask(1, "dgx-000", 1), ask(2, "dgx-001", 1))))
    [sbatch] = [c for c in slurm.commands if c[0] == "sbatch"]
    assert [a for a in sbatch if a.startswith("--switches")] == expected
    assert sbatch.index("--qos=high") + 1 == sbatch.index("-N1") - len(expected)   # job-wide: before the first component


@pytest.mark.parametrize("job_text,expected", [
    ("gangmaster:\n  networkDomain: {required: leaf}\n", DomainAsk("leaf", required=True)),
    ("gangmaster:\n  networkDomain: {preferred: spine}\n", DomainAsk("spine", required=False)),
    ("", None),
])
def test_the_jobs_network_domain_is_what_slurm_runs_hand_the_client(job_text, expected):
    from gangmaster.am.spec.jobspec import parse_job
    from gangmaster.tools.slurm.runs import job_domain

    base = ("protocolVersion: 2\nname: j\ntype: job\ntaskRoles:\n  worker:\n    instances: 2\n"
            "    resourcePerInstance: {gpu: 1, cpu: 1, memoryMB: 512}\n    commands: [\"true\"]\n")
    assert job_domain(parse_job(base + job_text)) == expected
