"""metrics.json's figures of a dozen replays of shipped fixtures equal those the driver gave
before it kept its job state in columns (tests/fixtures/replay_engine/metrics_golden.json,
written by tests/unit/replay_metric_cases.py on main 9707eb1): the same decisions and the
same figures, whatever the driver keeps per job."""
from __future__ import annotations

import json

import pytest

from replay_metric_cases import GOLDEN, NAMES, figures


@pytest.mark.parametrize("name", NAMES)
def test_the_metrics_are_those_of_the_driver_before_columns(name):
    assert figures(name) == json.loads(GOLDEN.read_text())[name]
