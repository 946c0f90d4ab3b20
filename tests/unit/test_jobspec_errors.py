"""Every bad job spec input and the exact line it produces (file + field path)."""
from __future__ import annotations

import copy

import pytest

from gangmaster.am.spec.jobspec import JobSpecError, parse_job, read_job
from gangmaster.conf.fields import ConfigError

SELECTORS = ["job-packing", "locality", "random"]
SRC = "job.yaml"


def base() -> dict:
    return {
        "protocolVersion": 2, "name": "ps", "type": "job",
        "parameters": {"lr": 0.1},
        "taskRoles": {
            "server": {"instances": 2,
                       "resourcePerInstance": {"cpu": 8, "memoryMB": 1024, "gpu": 0},
                       "commands": ["serve"]},
            "worker": {"instances": 4,
                       "resourcePerInstance": {"cpu": 8, "memoryMB": 1024, "gpu": 1,
                                               "ports": {"nccl": 1}},
                       "commands": ["train --lr <% $parameters.lr %>"]},
        },
    }


def mutate(path: str, value, data: dict | None = None) -> dict:
    """Set (or with value DELETE, remove) the dotted ``path`` of a copy of ``base()``."""
    data = copy.deepcopy(data or base())
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return data


DELETE = object()


def _case_id(case: tuple) -> str:
    """A test id that is the same in every process (pytest-xdist's workers must agree on it)."""
    path, value = case[0], case[1]
    return f"{path}={'<deleted>' if value is DELETE else repr(value)}"[:60]


W = "taskRoles.worker"
R = f"{W}.resourcePerInstance"
G = f"{W}.gangmaster"

CASES = [
    # --- OpenPAI fields -------------------------------------------------------
    ("protocolVersion", 1, "protocolVersion: expected 2, got 1"),
    ("protocolVersion", DELETE, "protocolVersion: expected 2 (OpenPAI job protocol v2)"),
    ("name", "my job", 'name: expected a name of letters, digits, _ and -, got "my job"'),
    ("name", DELETE, "name: expected a value (the field is required)"),
    ("type", "data", 'type: expected one of job, got "data"'),
    ("jobRetryCount", -1, "jobRetryCount: expected an integer >= 0, got -1"),
    ("parameters", [1], "parameters: expected a mapping, got a list"),
    ("taskRoles", DELETE, "taskRoles: expected a value (the field is required)"),
    ("taskRoles", {}, "taskRoles: expected at least one task role"),
    ("taskRoles.ps-1", {"resourcePerInstance": {"cpu": 1, "memoryMB": 1, "gpu": 0},
                        "commands": ["x"]},
     'taskRoles.ps-1: expected a task role name of letters, digits and _ '
     '(not starting with a digit), got "ps-1"'),
    ("taskRoles.worker", "big", 'taskRoles.worker: expected a mapping, got "big"'),
    ("priority", 3, "priority: expected no such field here; known fields: contributor, "
     "defaults, deployments, description, extras, gangmaster, jobRetryCount, name, "
     "parameters, prerequisites, protocolVersion, secrets, taskRoles, type, version"),
    (f"{W}.instances", -2, f"{W}.instances: expected an integer >= 1, got -2"),
    (f"{W}.instances", 0, f"{W}.instances: expected an integer >= 1, got 0"),
    (f"{W}.instances", "4", f'{W}.instances: expected an integer >= 1, got "4"'),
    (f"{W}.taskRetryCount", -1, f"{W}.taskRetryCount: expected an integer >= 0, got -1"),
    (f"{R}.gpu", "four", f'{R}.gpu: expected an integer within 0..64, got "four"'),
    (f"{R}.cpu", 1.5, f"{R}.cpu: expected an integer >= 0, got 1.5"),
    (f"{R}.memoryMB", DELETE, f"{R}.memoryMB: expected a value (the field is required)"),
    (f"{R}.disk", 10, f"{R}.disk: expected no such field here; known fields: cpu, gpu, "
     "memoryMB, ports"),
    (f"{R}.ports", [1], f"{R}.ports: expected a mapping, got a list"),
    (f"{R}.ports.nccl", -1, f"{R}.ports.nccl: expected an integer >= 0, got -1"),
    (f"{R}.ports.2nd", 1, f'{R}.ports.2nd: expected a port label name of letters, digits '
     'and _ (not starting with a digit), got "2nd"'),
    (f"{W}.resourcePerInstance", DELETE,
     f"{W}.resourcePerInstance: expected a value (the field is required)"),
    (f"{W}.commands", DELETE, f"{W}.commands: expected a value (the field is required)"),
    (f"{W}.commands", [], f"{W}.commands: expected a non-empty list of strings, got a list"),
    (f"{W}.commands", ["ok", 3], f"{W}.commands: expected a list of strings, got a list"),
    (f"{W}.commands", ["train --bs <% $parameters.bs %>"],
     f'{W}.commands[0]: expected a reference to a defined parameter (defined: lr), '
     'got "$parameters.bs"'),
    (f"{W}.completion.minFailedInstances", "1",
     f'{W}.completion.minFailedInstances: expected an integer within -2147483648..2147483647, '
     'got "1"'),
    (f"{W}.completion.minSucceededInstances", 2 ** 31,
     f"{W}.completion.minSucceededInstances: expected an integer within "
     "-2147483648..2147483647, got 2147483648"),
    (f"{W}.completion.minSucceeded", 1,
     f"{W}.completion.minSucceeded: expected no such field here; known fields: "
     "minFailedInstances, minSucceededInstances"),
    (f"{W}.resourcesPerInstance", {}, f"{W}.resourcesPerInstance: expected no such field "
     "here; known fields: commands, completion, data, dockerImage, extraContainerOptions, "
     "gangmaster, instances, output, prerequisites, protocolVersion, resourcePerInstance, "
     "script, taskRetryCount"),
    # --- gangmaster: per role --------------------------------------------------
    (f"{G}.requestRatio", 0, f"{G}.requestRatio: expected a number > 0 and <= 1, got 0"),
    (f"{G}.requestRatio", 1.5, f"{G}.requestRatio: expected a number > 0 and <= 1, got 1.5"),
    (f"{G}.requestRatio", "half", f'{G}.requestRatio: expected a number > 0 and <= 1, got "half"'),
    (f"{G}.maxInstancesPerNode", 0, f"{G}.maxInstancesPerNode: expected an integer >= 1, got 0"),
    (f"{G}.nodeLabel", "", f'{G}.nodeLabel: expected a name of 1..255 characters (MAX_NAME_CHARS) '
                           f'without spaces or control characters, got ""'),
    (f"{G}.gpuTypes", [1], f"{G}.gpuTypes: expected a list of names (a name of 1..255 characters "
                           f"(MAX_NAME_CHARS) without spaces or control characters), got a list"),
    # a share of one GPU: 1..999 milli, and never with whole GPUs (the worker asks gpu: 1)
    (f"{G}.gpuMilli", 250, f'{G}.gpuMilli: expected {R}.gpu 0 with it (a share of one GPU asks no whole GPU; '
                           f'whole GPUs are asked with gpu alone), got "gpuMilli 250 with gpu 1"'),
    (f"{G}.gpuMilli", 1000, f"{G}.gpuMilli: expected an integer within 1..999 (milli-GPU: a share of one GPU; "
                            f"whole GPUs are asked with resourcePerInstance.gpu), got 1000"),
    (f"{G}.gpuMilli", 0, f"{G}.gpuMilli: expected an integer within 1..999 (milli-GPU: a share of one GPU; "
                         f"whole GPUs are asked with resourcePerInstance.gpu), got 0"),
    (f"{G}.gpuMilli", 0.5, f"{G}.gpuMilli: expected an integer within 1..999 (milli-GPU: a share of one GPU; "
                           f"whole GPUs are asked with resourcePerInstance.gpu), got 0.5"),
    (f"{G}.gpuMilli", True, f"{G}.gpuMilli: expected an integer within 1..999 (milli-GPU: a share of one GPU; "
                            f"whole GPUs are asked with resourcePerInstance.gpu), got True"),
    (f"{G}.selector", "fastest",
     f'{G}.selector: expected one of job-packing, locality, random, got "fastest"'),
    (f"{G}.rackPolicy", "diagonal",
     f'{G}.rackPolicy: expected one of none, pack, spread, got "diagonal"'),
    (f"{G}.simulatedDurationSeconds", -1,
     f"{G}.simulatedDurationSeconds: expected a number >= 0, got -1"),
    (f"{G}.simulatedExitCode", 256,
     f"{G}.simulatedExitCode: expected an integer within 0..255, got 256"),
    (f"{G}.failOnAttempts", [0], f"{G}.failOnAttempts: expected a list of attempt numbers "
     ">= 1, got a list"),
    (f"{G}.failOnAttempts", [2], f'{G}.failOnAttempts: expected attempt numbers within 1..1 '
     '(the job\'s attempts), got "2"'),
    (f"{G}.failInstance", 4, f"{G}.failInstance: expected an instance index within 0..3, got 4"),
    (f"{G}.failExitCode", 0, f"{G}.failExitCode: expected an integer within 1..255, got 0"),
    (f"{G}.failBeforeBarrier", "yes", f'{G}.failBeforeBarrier: expected true or false, got "yes"'),
    (f"{G}.gangs", [["worker"]], f"{G}.gangs: expected no such field here; known fields: "
     "failBeforeBarrier, failExitCode, failInstance, failOnAttempts, gpuMilli, gpuTypes, maxInstancesPerNode, "
     "networkDomain, nodeLabel, rackPolicy, requestRatio, selector, simulatedDurationSeconds, simulatedExitCode"),
    # a network domain: one mode naming a level
    (f"{G}.networkDomain", {"sometimes": "rack"}, f"{G}.networkDomain: expected one of required, preferred naming "
                                                  'a domain level, e.g. {required: rack}, got "sometimes"'),
    (f"{G}.networkDomain", {"required": "rack", "preferred": "switch"},
     f"{G}.networkDomain: expected one of required, preferred naming a domain level, e.g. {{required: rack}}, "
     'got "required, preferred"'),
    (f"{G}.networkDomain", {}, f"{G}.networkDomain: expected one of required, preferred naming a domain level, "
                               'e.g. {required: rack}, got "an empty mapping"'),
    (f"{G}.networkDomain", "rack", f'{G}.networkDomain: expected a mapping, got "rack"'),
    (f"{G}.networkDomain", {"required": 3}, f"{G}.networkDomain.required: expected a name of 1..255 "
                                            "characters (MAX_NAME_CHARS) without spaces or control characters, got 3"),
    # --- gangmaster: job level -------------------------------------------------
    ("gangmaster.gangs", [["worker", "wrker"], ["server"]],
     'gangmaster.gangs[0][1]: expected a task role (one of server, worker), got "wrker"'),
    ("gangmaster.gangs", [["worker"], ["worker", "server"]],
     "gangmaster.gangs[1][0]: expected each task role in one gang only ('worker' is already "
     'in gangs[0]), got "worker"'),
    ("gangmaster.gangs", [["worker"]],
     "gangmaster.gangs: expected every task role in a gang; missing: server"),
    ("gangmaster.gangs", [["worker", "server"], []],
     "gangmaster.gangs[1]: expected a non-empty list of task role names, got a list"),
    ("gangmaster.gangs", "all", 'gangmaster.gangs: expected a non-empty list of gangs, each a '
     'list of task role names, got "all"'),
    ("gangmaster.retryScope", "stage", 'gangmaster.retryScope: expected one of job, role, got "stage"'),
    ("gangmaster.attempts", 0, "gangmaster.attempts: expected an integer >= 1, got 0"),
    ("gangmaster.barrierTimeoutSeconds", 0,
     "gangmaster.barrierTimeoutSeconds: expected a number > 0, got 0"),
    ("gangmaster.failOnAttempts", [1], "gangmaster.failOnAttempts: expected no such field here; "
     "known fields: attempts, barrierTimeoutSeconds, expectedDurationSeconds, gangs, gpuMilli, gpuTypes, "
     "maxInstancesPerNode, networkDomain, nodeLabel, priority, rackPolicy, requestRatio, retryScope, selector, "
     "simulatedDurationSeconds, simulatedExitCode"),
    ("gangmaster.networkDomain", {"preferred": ""}, "gangmaster.networkDomain.preferred: expected a name of "
     f'1..255 characters (MAX_NAME_CHARS) without spaces or control characters, got ""'),
    ("gangmaster.priority", 1001,
     "gangmaster.priority: expected an integer <= 1,000 (MAX_PRIORITY in conf/limits.py), got 1001"),
    ("gangmaster.priority", "high", 'gangmaster.priority: expected an integer >= -1000, got "high"'),
    ("gangmaster.requestRatio", 2, "gangmaster.requestRatio: expected a number > 0 and <= 1, got 2"),
    ("gangmaster.expectedDurationSeconds", -1, "gangmaster.expectedDurationSeconds: expected a number >= 0, got -1"),
    ("gangmaster.expectedDurationSeconds", 1e12, "gangmaster.expectedDurationSeconds: expected a number <= "
     "315,360,000.0 (MAX_DURATION_S in conf/limits.py), got 1000000000000.0"),
    ("gangmaster.expectedDurationSeconds", "1h", 'gangmaster.expectedDurationSeconds: expected a number >= 0, '
     'got "1h"'),
    ("taskRoles.worker.gangmaster.expectedDurationSeconds", 60,
     "taskRoles.worker.gangmaster.expectedDurationSeconds: expected no such field here; known fields: "
     "failBeforeBarrier, failExitCode, failInstance, failOnAttempts, gpuMilli, gpuTypes, maxInstancesPerNode, "
     "networkDomain, nodeLabel, rackPolicy, requestRatio, selector, simulatedDurationSeconds, simulatedExitCode"),
    ("gangmaster", [1], "gangmaster: expected a mapping, got a list"),
]


@pytest.mark.parametrize("path,value,message", CASES, ids=[_case_id(c) for c in CASES])
def test_each_bad_input_gives_its_exact_message(path, value, message):
    with pytest.raises(JobSpecError) as info:
        read_job(mutate(path, value), SRC, selectors=SELECTORS)
    assert info.value.messages == [f"{SRC}: {message}"]


def test_the_base_job_is_valid():
    spec = read_job(base(), SRC, selectors=SELECTORS)
    assert spec.role_names == ("server", "worker")


def test_every_error_is_reported_not_just_the_first():
    data = base()
    data["protocolVersion"] = 3
    data["taskRoles"]["worker"]["resourcePerInstance"]["gpu"] = "four"
    data["taskRoles"]["server"]["instances"] = -1
    data["taskRoles"]["worker"]["gangmaster"] = {"selector": "nope", "requestRatio": 7}
    data["gangmaster"] = {"gangs": [["worker", "ghost"], ["server"]]}
    with pytest.raises(JobSpecError) as info:
        read_job(data, SRC, selectors=SELECTORS)
    assert sorted(e.field for e in info.value.errors) == sorted([
        "protocolVersion",
        "gangmaster.gangs[0][1]",
        "taskRoles.server.instances",
        "taskRoles.worker.resourcePerInstance.gpu",
        "taskRoles.worker.gangmaster.requestRatio",
        "taskRoles.worker.gangmaster.selector",
    ])
    text = str(info.value)
    assert text.startswith("job.yaml: 6 errors in the job spec:\n")
    assert all(f"  {m}" in text for m in info.value.messages)


def test_job_spec_error_is_a_config_error_and_a_value_error():
    # The CLI turns ConfigError into exit status 2; callers may catch ValueError.
    with pytest.raises(JobSpecError) as info:
        read_job(mutate("name", DELETE), SRC, selectors=SELECTORS)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("text,message", [
    ("taskRoles: [", "<job>: line 1: expected valid YAML"),
    ("- 1\n- 2\n", "<job>: (top level): expected a mapping, got a list"),
])
def test_documents_that_are_not_job_mappings(text, message):
    with pytest.raises(JobSpecError) as info:
        parse_job(text, selectors=SELECTORS)
    assert len(info.value.errors) == 1
    assert info.value.messages[0].startswith(message)


def test_missing_file_names_the_file(tmp_path):
    from gangmaster.am.spec.jobspec import load_job
    with pytest.raises(JobSpecError) as info:
        load_job(tmp_path / "nope.yaml")
    assert info.value.messages == [f"{tmp_path / 'nope.yaml'}: expected an existing file"]


def test_unknown_selector_is_checked_against_the_registry():
    from gangmaster.selectors.selector import selector_classes
    known = list(selector_classes())
    data = mutate(f"{G}.selector", "no-such-strategy")
    with pytest.raises(JobSpecError) as info:
        read_job(data, SRC)
    assert info.value.messages == [
        f'{SRC}: {G}.selector: expected one of {", ".join(known)}, got "no-such-strategy"']
    spec = read_job(mutate(f"{G}.selector", known[0]), SRC)
    assert spec.role("worker").selector == known[0]
