"""House rules of the package layout (DESIGN.md)."""
import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_selectors_folder_has_no_init_py():
    # A regular package named `selectors` at the root would shadow the standard
    # library module that subprocess and asyncio import.
    assert not (ROOT / "selectors" / "__init__.py").exists()


def test_stdlib_selectors_wins_with_the_root_on_sys_path():
    out = subprocess.run([sys.executable, "-c", "import selectors, subprocess; print(selectors.DefaultSelector.__name__)"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("Selector")


def test_subpackages_import_under_gangmaster():
    for name in ("gangmaster.selectors.pipeline", "gangmaster.gpu_topology.masks", "gangmaster.conf.fields",
                 "gangmaster.tools.cli"):
        assert importlib.import_module(name)
