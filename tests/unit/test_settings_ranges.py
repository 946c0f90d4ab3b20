"""Every knob of conf/defaults.yaml that the am:, selection: and rm: readers type has a
range: a setting that cannot work is refused when the settings load, naming the file
and the knob (issue 10: ``am.heartbeat_s: 1e-9`` was accepted and the run never ended)."""
from __future__ import annotations

import pytest
import yaml

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.conf import conf_path
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.cli import main
from gangmaster.tools.rmsim.rm_settings import RMSettings

READERS = {"am": AMSettings, "selection": SelectionSettings, "rm": RMSettings}

# (section, knob, a refused value, what the message says is expected)
REFUSED = [
    ("am", "heartbeat_s", 1.0e-9, "a number >= 0.001"),
    ("am", "heartbeat_s", 7200, "a number <= 3,600.0 (MAX_HEARTBEAT_S in conf/limits.py)"),
    ("am", "heartbeat_s", float("nan"), "a finite number >= 0.001"),
    ("am", "hold_timeout_s", 0, "a number >= 0.001"),
    ("am", "hold_timeout_s", float("inf"), "a finite number >= 0.001"),
    ("am", "release_backoff_s", -1, "a number >= 0.0"),
    ("am", "release_backoff_max_s", 1, "a number >= release_backoff_s (10)"),
    ("am", "release_jitter", 1.5, "a number within 0..1"),
    ("am", "reselect_after_s", 1.0e12, "a number <= 315,360,000.0 (MAX_DURATION_S in conf/limits.py)"),
    ("am", "max_rejections", 0, "an integer >= 1"),
    ("am", "max_am_attempts", 10 ** 6, "an integer <= 1,000 (MAX_ATTEMPTS in conf/limits.py)"),
    ("am", "metrics_port", 70000, "an integer within 0..65535"),
    ("am", "max_virtual_time_s", float("inf"), "a finite number >= 0.001"),
    ("selection", "selector", "fastest", "one of "),
    ("selection", "candidate_nodes_factor", 10 ** 9, "an integer <= 1,000 (MAX_CANDIDATE_NODES_FACTOR"),
    ("selection", "port_min", 70000, "an integer within 0..65535"),
    ("rm", "process_poll_s", 1.0e-9, "a number >= 0.001"),
    ("rm", "process_poll_s", 600, "a number <= 60.0 (MAX_LOOP_PERIOD_S in conf/limits.py)"),
    ("rm", "kill_grace_s", float("inf"), "a finite number >= 0"),
    ("rm", "state_save_interval_s", 0, "a number >= 0.001"),
    ("rm", "grpc_workers", 10 ** 6, "an integer <= 1,024 (MAX_WORKER_THREADS in conf/limits.py)"),
    ("rm", "allocation_expiry_s", float("nan"), "a finite number >= 0.001"),
    ("rm", "scheduling_interval_s", 1.0e-9, "a number >= 0.001"),
]


def override(tmp_path, section: str, knob: str, value) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({section: {knob: value}}))
    return str(path)


def test_the_shipped_defaults_are_within_every_range():
    for reader in READERS.values():
        reader.load()


@pytest.mark.parametrize("section,knob,value,expected", REFUSED,
                         ids=[f"{s}.{k}={v!r}" for s, k, v, _ in REFUSED])
def test_a_value_out_of_range_is_refused_naming_file_and_knob(tmp_path, section, knob, value, expected):
    path = override(tmp_path, section, knob, value)
    with pytest.raises(ConfigError) as info:
        READERS[section].load(path)
    assert str(info.value).startswith(f"{path}: {section}.{knob}: expected {expected}")


def test_null_means_never_where_the_knob_allows_it(tmp_path):
    settings = RMSettings.load(override(tmp_path, "rm", "allocation_expiry_s", None))
    assert settings.allocation_expiry_s is None


def test_an_exponent_yaml_reads_as_text_says_how_to_write_it(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("am:\n  heartbeat_s: 1e-9\n")      # YAML 1.1: text, not a number
    with pytest.raises(ConfigError, match="write the mantissa with a point, as in 1.0e-3"):
        AMSettings.load(str(path))


def test_run_refuses_a_heartbeat_that_could_never_finish(tmp_path, capsys):
    path = override(tmp_path, "am", "heartbeat_s", 1.0e-9)
    status = main(["run", str(conf_path("jobs/single-gpu.yaml")), "--config", path,
                   "--work-dir", str(tmp_path / "w")])
    assert status == 2
    assert f"{path}: am.heartbeat_s: expected a number >= 0.001" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()
