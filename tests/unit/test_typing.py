"""The strategy plugin API type-checks under ``mypy --strict``, and so does a plugin written
against it (tests/fixtures/selector_plugin/), as a strategy author's CI would check theirs.

The repository's folders are the package's subpackages (``selectors/`` is
``gangmaster.selectors``, pyproject.toml maps them), so mypy is shown the package as it is
installed: a tree of links named ``gangmaster/``. Imported modules outside the API are read
for their types but not reported (``--follow-imports=silent``), as an installed package's
are for a plugin author."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="needs mypy (the test and dev extras)")

ROOT = Path(__file__).resolve().parents[2]
SUBPACKAGES = ("am", "protocol", "selectors", "gpu_topology", "tools", "conf")
#: what a strategy subclasses and calls, and the values its ``rank`` receives
PLUGIN_API = ("selectors.selector", "selectors.values", "selectors.request", "selectors.resources",
              "selectors.workload", "selectors.ports", "selectors.cluster", "gpu_topology.masks")
PLUGIN = ROOT / "tests" / "fixtures" / "selector_plugin" / "gangmaster_example_plugin.py"


@pytest.fixture(scope="module")
def installed_layout(tmp_path_factory):
    tree = tmp_path_factory.mktemp("typing")
    (tree / "gangmaster").mkdir()
    for name in SUBPACKAGES:
        (tree / "gangmaster" / name).symlink_to(ROOT / name, target_is_directory=True)
    shutil.copy(PLUGIN, tree)
    return tree


def mypy(tree: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--cache-dir", str(tree / ".mypy_cache"), *targets],
                          cwd=tree, capture_output=True, text=True, timeout=300)


def test_the_plugin_api_is_strict_clean_and_a_plugin_checks_against_it(installed_layout):
    modules = [arg for name in PLUGIN_API for arg in ("-m", f"gangmaster.{name}")]
    api = mypy(installed_layout, *modules)
    assert api.returncode == 0, api.stdout + api.stderr
    plugin = mypy(installed_layout, PLUGIN.name)
    assert plugin.returncode == 0, plugin.stdout + plugin.stderr


def test_the_packages_say_they_are_typed():
    for name in SUBPACKAGES:
        assert (ROOT / name / "py.typed").is_file(), f"{name}/py.typed (PEP 561)"
