"""Invariants of job specs: parameter substitution, the RM ask, gang partitions,
error collection and the completion rule."""
from __future__ import annotations

import copy

import pytest
from hypothesis import assume, given, strategies as st

from gangmaster.am.spec.jobspec import JobSpecError, read_job
from gangmaster.am.spec.jobspec_params import format_value, references, substitute
from gangmaster.am.spec.jobspec_model import SUCCEEDED_EARLY

SELECTORS = ["job-packing", "locality", "random"]

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
values = st.one_of(st.integers(-10**6, 10**6), st.booleans(),
                   st.text(st.characters(blacklist_categories=("Cs",)), max_size=10),
                   st.floats(allow_nan=False, allow_infinity=False))
literals = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12).filter(
    lambda s: "<%" not in s and "%>" not in s and "<" not in s[-1:])
spaces = st.sampled_from(["", " ", "  "])


@given(st.dictionaries(names, values, min_size=1, max_size=5), st.data())
def test_substitution_round_trip(parameters, data):
    keys = sorted(parameters)
    parts = data.draw(st.lists(st.tuples(literals, st.sampled_from(keys), spaces, spaces),
                               max_size=6))
    tail = data.draw(literals)
    template = "".join(f"{lit}<%{a}$parameters.{k}{b}%>" for lit, k, a, b in parts) + tail
    expected = "".join(lit + format_value(parameters[k]) for lit, k, _, _ in parts) + tail
    text, missing = substitute(template, parameters)
    assert (text, missing) == (expected, [])
    assert references(template) == [f"$parameters.{k}" for _, k, _, _ in parts]


@given(literals)
def test_text_without_references_is_unchanged(text):
    assert substitute(text, {"a": 1}, {"b": 2}) == (text, [])


@given(st.dictionaries(names, values, max_size=3), names, literals)
def test_an_undefined_parameter_is_reported_and_left_in_place(parameters, name, lit):
    template = f"{lit}<% $parameters.{name} %>"
    text, missing = substitute(template, parameters)
    if name in parameters:
        assert missing == [] and text == lit + format_value(parameters[name])
    else:
        assert missing == [f"$parameters.{name}"] and text == template


@given(st.dictionaries(names, values, max_size=3), names)
def test_secrets_are_kept_verbatim_unless_given(secrets, name):
    template = f"login <% $secrets.{name} %>"
    assert substitute(template, {}) == (template, [])
    text, missing = substitute(template, {}, secrets)
    if name in secrets:
        assert (text, missing) == (f"login {format_value(secrets[name])}", [])
    else:
        assert (text, missing) == (template, [f"$secrets.{name}"])


def job(roles: dict[str, dict], **top) -> dict:
    data = {"protocolVersion": 2, "name": "j", "type": "job", "taskRoles": {}}
    for name, extra in roles.items():
        role = {"instances": 1, "commands": ["x"],
                "resourcePerInstance": {"cpu": 1, "memoryMB": 64, "gpu": 0}}
        role.update(extra)
        data["taskRoles"][name] = role
    data.update(top)
    return data


@given(cpu=st.integers(0, 512), memory=st.integers(0, 10**6), gpus=st.integers(0, 16),
       ports=st.dictionaries(names, st.integers(0, 4), max_size=3),
       ratio=st.floats(min_value=1e-3, max_value=1.0))
def test_ask_is_cpu_times_ratio_and_nothing_else_changes(cpu, memory, gpus, ports, ratio):
    assume(cpu or memory or gpus)   # a role asking for nothing is refused (tests/unit/test_rm_limits.py)
    spec = read_job(job({"r": {"resourcePerInstance": {"cpu": cpu, "memoryMB": memory,
                                                       "gpu": gpus, "ports": ports},
                               "gangmaster": {"requestRatio": ratio}}}), "p.yaml",
                    selectors=SELECTORS)
    role = spec.role("r")
    planned, ask = role.planned_resource(), role.ask_resource()
    assert planned.vcores == cpu
    assert ask.vcores == cpu * ratio
    assert ask.vcores <= planned.vcores
    assert (ask.memory_mb, ask.gpus, ask.ports) == (planned.memory_mb, planned.gpus,
                                                   planned.ports) == (memory, gpus, sum(ports.values()))


@given(gpus=st.integers(0, 3), milli=st.one_of(st.none(), st.integers(-5, 1005)), at_job_level=st.booleans(),
       cpu=st.integers(0, 2))
def test_a_share_is_asked_exactly_when_gpu_milli_is_valid_and_no_whole_gpu_is(gpus, milli, at_job_level, cpu):
    """``gpuMilli`` (a role's, or the job's default) gives each instance a share of one GPU:
    the ask carries it (no whole GPU, no GPU named: the RM or the selector picks one) when it
    is 1..999 and the role asks ``gpu: 0``; otherwise the spec is refused naming the key."""
    keys = {} if milli is None else {"gpuMilli": milli}
    role = {"resourcePerInstance": {"cpu": cpu, "memoryMB": 0, "gpu": gpus}}
    if not at_job_level:
        role["gangmaster"] = keys
    data = job({"r": role}, **({"gangmaster": keys} if at_job_level else {}))
    valid_share = milli is not None and 1 <= milli <= 999 and gpus == 0
    asks_something = cpu or gpus or valid_share
    if (milli is None and asks_something) or valid_share:
        ask = read_job(data, "p.yaml", selectors=SELECTORS).role("r").ask_resource()
        assert (ask.gpu_milli, ask.gpus, ask.gpu_mask) == ((milli, 0, 0) if valid_share else (0, gpus, 0))
        assert ask.gpu_share == (milli / 1000 if valid_share else gpus)
    else:
        with pytest.raises(JobSpecError) as info:
            read_job(data, "p.yaml", selectors=SELECTORS)
        if milli is None:
            field = "taskRoles.r.resourcePerInstance.cpu"          # asks for nothing
        elif not 1 <= milli <= 999:
            field = "gangmaster.gpuMilli" if at_job_level else "taskRoles.r.gangmaster.gpuMilli"
        else:
            field = "taskRoles.r.gangmaster.gpuMilli"              # with whole GPUs: the role's conflict
        assert any(f"p.yaml: {field}: expected" in m for m in info.value.messages), info.value.messages


role_sets = st.lists(names, min_size=1, max_size=6, unique=True)


@given(role_sets, st.data())
def test_a_partition_of_the_roles_is_kept_as_the_gangs(roles, data):
    order = data.draw(st.permutations(roles))
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(order) - 1)), max_size=len(order))))
    cuts = [c for c in cuts if 0 < c < len(order)]
    bounds = [0, *cuts, len(order)]
    gangs = [list(order[a:b]) for a, b in zip(bounds, bounds[1:])]
    spec = read_job(job({r: {} for r in roles}, gangmaster={"gangs": gangs}), "g.yaml",
                    selectors=SELECTORS)
    assert spec.gangs == tuple(tuple(g) for g in gangs)
    for index, gang in enumerate(gangs):
        assert [r.name for r in spec.gang_roles(index)] == gang
        assert all(spec.gang_of(name) == index for name in gang)


@given(role_sets.filter(lambda r: len(r) >= 2), st.data())
def test_a_gang_policy_that_leaves_a_role_out_is_rejected(roles, data):
    left_out = data.draw(st.sampled_from(roles))
    gangs = [[r for r in roles if r != left_out]]
    with pytest.raises(JobSpecError) as info:
        read_job(job({r: {} for r in roles}, gangmaster={"gangs": gangs}), "g.yaml",
                 selectors=SELECTORS)
    assert info.value.messages == [
        f"g.yaml: gangmaster.gangs: expected every task role in a gang; missing: {left_out}"]


# Independent breakages: each must produce exactly one error at its own path.
BREAKAGES = {
    "protocolVersion": lambda d: d.update(protocolVersion=9),
    "jobRetryCount": lambda d: d.update(jobRetryCount=-3),
    "taskRoles.a.instances": lambda d: d["taskRoles"]["a"].update(instances=0),
    "taskRoles.a.resourcePerInstance.gpu":
        lambda d: d["taskRoles"]["a"]["resourcePerInstance"].update(gpu="four"),
    "taskRoles.b.resourcePerInstance.memoryMB":
        lambda d: d["taskRoles"]["b"]["resourcePerInstance"].update(memoryMB=-1),
    "taskRoles.b.commands[0]": lambda d: d["taskRoles"]["b"].update(
        commands=["<% $parameters.nope %>"]),
    "taskRoles.b.gangmaster.requestRatio":
        lambda d: d["taskRoles"]["b"].setdefault("gangmaster", {}).update(requestRatio=0),
    "taskRoles.a.gangmaster.selector":
        lambda d: d["taskRoles"]["a"].setdefault("gangmaster", {}).update(selector="x"),
    "gangmaster.retryScope": lambda d: d.setdefault("gangmaster", {}).update(retryScope="x"),
    "gangmaster.barrierTimeoutSeconds":
        lambda d: d.setdefault("gangmaster", {}).update(barrierTimeoutSeconds=-1),
}


@given(st.sets(st.sampled_from(sorted(BREAKAGES)), min_size=1))
def test_every_breakage_is_reported_once(broken):
    data = job({"a": {}, "b": {}})
    for path in broken:
        BREAKAGES[path](data)
    with pytest.raises(JobSpecError) as info:
        read_job(copy.deepcopy(data), "e.yaml", selectors=SELECTORS)
    assert sorted(e.field for e in info.value.errors) == sorted(broken)




@given(instances=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       min_failed=st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from([None, 1, 2])),
       min_succeeded=st.tuples(st.sampled_from([None, 1]), st.sampled_from([None, 1])),
       data=st.data())
def test_completion_rule(instances, min_failed, min_succeeded, data):
    roles = {}
    for name, n, mf, ms in zip("ab", instances, min_failed, min_succeeded):
        roles[name] = {"instances": n, "completion": {
            "minFailedInstances": None if mf is None else min(mf, n),
            "minSucceededInstances": ms}}
    spec = read_job(job(roles), "c.yaml", selectors=SELECTORS)
    succeeded, failed = {}, {}
    for name, n in zip("ab", instances):
        s = data.draw(st.integers(0, n))
        succeeded[name], failed[name] = s, data.draw(st.integers(0, n - s))
    outcome = spec.outcome(succeeded, failed)
    all_done = all(succeeded[r] + failed[r] == n for r, n in zip("ab", instances))
    if all_done:
        assert outcome is not None                     # a finished attempt has an outcome
    if not any(failed.values()):
        assert outcome != "failed"
    if outcome == "failed":
        assert any(spec.role(r).completion.failed(failed[r]) for r in "ab")


@given(instances=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       min_failed=st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from([None, 1, 2])),
       min_succeeded=st.tuples(st.sampled_from([None, 1, 3]), st.sampled_from([None, 1, 3])),
       data=st.data())
def test_verdict_is_its_definition(instances, min_failed, min_succeeded, data):
    """JobSpec.verdict looks for early successes among the roles that can have one only;
    it answers as its definition over every role, from counts that name only the roles
    with some (as the AM's do)."""
    roles = {}
    for name, n, mf, ms in zip("ab", instances, min_failed, min_succeeded):
        roles[name] = {"instances": n, "completion": {
            "minFailedInstances": None if mf is None else min(mf, n),
            "minSucceededInstances": None if ms is None else min(ms, n)}}
    spec = read_job(job(roles), "c.yaml", selectors=SELECTORS)
    succeeded, failed = {}, {}
    for name, n in zip("ab", instances):
        s = data.draw(st.integers(0, n))
        f = data.draw(st.integers(0, n - s))
        if s:
            succeeded[name] = s
        if f:
            failed[name] = f
    every = [spec.role(r) for r in "ab"]
    if any(r.completion.failed(failed.get(r.name, 0)) for r in every):
        defined = "failed"
    elif any(r.completion.succeeded(succeeded.get(r.name, 0)) for r in every):
        defined = SUCCEEDED_EARLY
    elif all(succeeded.get(r.name, 0) + failed.get(r.name, 0) >= r.instances for r in every):
        defined = "succeeded"
    else:
        defined = None
    assert spec.verdict(succeeded, failed) == defined


@given(st.text(min_size=1, max_size=8), st.text(max_size=8), st.dictionaries(st.sampled_from(["w", "ps"]),
                                                                              st.fixed_dictionaries({})),
       st.integers(-1000, 1000))
def test_a_spec_for_another_job_is_the_replaced_spec(name, source, simulation, priority):
    """JobSpec.for_job is dataclasses.replace of name, source, simulation and priority: equal
    field by field, the fields in the same order."""
    import dataclasses

    spec = read_job(job({"w": {"instances": 2}, "ps": {"instances": 1}}), "<test>")
    other = spec.for_job(name, source, simulation, priority)
    assert other == dataclasses.replace(spec, name=name, source=source, simulation=simulation, priority=priority)
    assert list(vars(other)) == list(vars(spec))
    assert (other.name, other.source, other.simulation, other.priority) == (name, source, simulation, priority)
    assert other.roles is spec.roles
