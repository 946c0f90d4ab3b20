"""OpenPAI completion counts are taken as OpenPAI takes them (issue 10).

OpenPAI's schema accepts any integer or null for ``minFailedInstances`` and
``minSucceededInstances``; its runtime hands them to FrameworkController, which meets
a count only when it is reached, so a count no role can reach means "when every
instance has completed". Real HiveD demo jobs write ``minSucceededInstances: 6`` for
roles of 1-4 instances; they were refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from gangmaster.am.spec.jobspec import load_job, read_job
from gangmaster.tools.cli import main

HIVED = Path(__file__).resolve().parents[1] / "fixtures" / "jobspec" / "hived-style-completion.yaml"
SELECTORS = ["job-packing"]


def job(completion: dict, instances: int = 4, **gangmaster) -> dict:
    role = {"instances": instances, "completion": completion, "commands": ["x"],
            "resourcePerInstance": {"cpu": 1, "memoryMB": 1024, "gpu": 0}}
    if gangmaster:
        role["gangmaster"] = gangmaster
    return {"protocolVersion": 2, "name": "c", "type": "job", "taskRoles": {"w": role}}


def completion(values: dict, instances: int = 4):
    return read_job(job(values, instances), "c.yaml", selectors=SELECTORS).role("w").completion


def test_a_hived_style_job_validates_and_keeps_what_was_written(capsys):
    spec = load_job(HIVED, selectors=SELECTORS)
    trainer = spec.role("trainer").completion
    assert (trainer.min_failed, trainer.min_succeeded) == (1, None)          # what the AM applies
    assert main(["validate", str(HIVED)]) == 0
    out = capsys.readouterr().out
    assert ("  completion.minSucceededInstances: 6 is more than the role's 4 instance(s) and can "
            "never be met, i.e. not by count") in out.splitlines()


@pytest.mark.parametrize("written,effective", [
    # (minFailedInstances, minSucceededInstances) as written -> as applied, 4 instances
    ((1, None), (1, None)),
    ((None, -1), (None, None)),          # null and -1: not by count
    ((-1, 2), (None, 2)),
    ((0, 0), (1, None)),                 # 0 is read as unset: the defaults
    ((6, 6), (None, None)),              # past the instances: never met
    ((4, 4), (4, 4)),                    # exactly the instances: met when all of them are
    ((-3, -2), (1, 1)),                  # below -1: met by the first failure / success
])
def test_every_integer_or_null_has_openpai_meaning(written, effective):
    c = completion({"minFailedInstances": written[0], "minSucceededInstances": written[1]})
    assert (c.min_failed, c.min_succeeded) == effective


def test_counts_beyond_frameworkcontrollers_int32_are_refused():
    from gangmaster.am.spec.jobspec import JobSpecError
    with pytest.raises(JobSpecError, match=r"w\.completion\.minSucceededInstances: expected an "
                                           r"integer within -2147483648\.\.2147483647"):
        completion({"minSucceededInstances": 2 ** 31})


def test_unreachable_min_succeeded_succeeds_when_every_instance_has_completed():
    spec = read_job(job({"minSucceededInstances": 6}), "c.yaml", selectors=SELECTORS)
    assert spec.outcome({"w": 3}, {}) is None                    # still running
    assert spec.outcome({"w": 4}, {}) == "succeeded"             # all completed


def test_unreachable_min_failed_lets_the_attempt_finish(tmp_path, capsys):
    """minFailedInstances above the instances: a failed instance does not end the attempt;
    it ends, as a success, when every instance has completed (the AM, end to end)."""
    import yaml
    data = job({"minFailedInstances": 6}, failOnAttempts=[1], failInstance=0,
               simulatedDurationSeconds=5)
    path = tmp_path / "unreachable.yaml"
    path.write_text(yaml.safe_dump(data))
    status = main(["run", str(path), "--work-dir", str(tmp_path / "run"), "--json"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert '"outcome": "succeeded"' in out


def test_the_hived_style_job_runs_to_success(tmp_path, capsys):
    assert main(["run", str(HIVED), "--work-dir", str(tmp_path / "run"), "--quiet"]) == 0
    assert "SUCCEEDED" in capsys.readouterr().out
