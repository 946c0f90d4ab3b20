"""Shared test set-up: the hypothesis profiles.

``ci`` (used when CI is set, as on the CI machine) is derandomized and has no
deadline, so a run is repeatable and a slow machine does not fail a test. ``fast`` is the
fast tier's (README: *Tests*): a fifth of the examples, so one layer runs in under a minute."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", deadline=None, derandomize=True, max_examples=100,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.register_profile("fast", deadline=None, max_examples=20)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# The example third-party strategy plugin, in its installed layout (see its README):
# on sys.path, its entry point is found like any installed package's.
import sys
from pathlib import Path

_PLUGIN = Path(__file__).parent / "fixtures" / "selector_plugin"
if str(_PLUGIN) not in sys.path:
    sys.path.append(str(_PLUGIN))


import pytest


@pytest.fixture(scope="module", autouse=True)
def _selector_registry_unchanged(request):
    """Each test module leaves the strategy registry as it found it: a strategy a test
    registers for good (not through ``selector_registered``) would be in every later
    module's list of strategies, and which modules ran first would change what they see."""
    from gangmaster.selectors.selector import selector_classes

    before = selector_classes()
    yield
    after = selector_classes()
    assert after == before, (f"{request.module.__name__} changed the selector registry: added "
                             f"{sorted(after.keys() - before.keys())}, removed {sorted(before.keys() - after.keys())}, "
                             f"replaced {sorted(n for n in before.keys() & after.keys() if before[n] is not after[n])}")


@pytest.fixture
def without_figures(monkeypatch):
    """A replay report written as where matplotlib is not installed (the product's own path for
    that case): for tests of the report's folder, tables and pages, which a figure adds seconds
    of drawing to and nothing to check. The figures are tested in test_replay_report.py and
    test_replay_report_figures.py."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib now raises ImportError


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): two workers per core, at most eight. Half the
    suite's wall time is end-to-end tests waiting on processes, daemons and timers; a second
    worker per core runs unit tests in those waits instead of leaving the core idle."""
    return min(8, 2 * (os.cpu_count() or 1))


def _on_a_shared_engine(item) -> bool:
    """A test of the real YARN or Slurm cluster the session shares (tests/e2e/yarn_cluster.py,
    slurm_cluster.py): such tests take turns on it."""
    name = item.path.name
    return item.path.parent.name == "e2e" and (name.startswith("test_yarn_") or name.startswith("test_slurm_"))


def pytest_collection_modifyitems(session, config, items):
    """The tests on the shared YARN and Slurm clusters first: they take turns on their cluster,
    and run last they would leave the other workers idle while they do (the last 7 % of the
    tests took half the suite's wall time); run first, their waits overlap the unit tests."""
    items[:] = sorted(items, key=lambda item: not _on_a_shared_engine(item))
