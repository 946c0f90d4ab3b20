"""Imports point down only (DESIGN.md): conf <- gpu_topology <- selectors <- am <- tools.

Every import is checked, including those inside functions and under TYPE_CHECKING: a
type-only upward import still ties a lower layer to a higher one."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("conf", "gpu_topology", "selectors", "am", "tools")
RANK = {name: rank for rank, name in enumerate(LAYERS)}


def imported_layers(path: Path, layer: str, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, imported layer) for every import of a gangmaster layer in ``path``, a module of ``layer``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ["gangmaster", layer, *path.relative_to(root / layer).parent.parts]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: level 1 is the module's own package, each further level its parent
                base = package[:len(package) - (node.level - 1)]
                names = [".".join([*base, *([node.module] if node.module else [])])]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if len(parts) > 1 and parts[0] == "gangmaster" and parts[1] in RANK:
                found.append((node.lineno, parts[1]))
    return found


def upward_imports(root: Path = ROOT) -> list[str]:
    problems = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            if path.name.endswith("_pb2.py") or path.name.endswith("_pb2_grpc.py"):
                continue
            for line, imported in imported_layers(path, layer, root):
                if RANK[imported] > RANK[layer]:
                    problems.append(f"{path.relative_to(root)}:{line}: {layer} imports {imported}")
    return problems


def test_no_layer_imports_a_layer_above_it():
    assert upward_imports() == []


@pytest.mark.parametrize("source, upward", [
    ("from gangmaster.am.jobspec import load_job\n", True),
    ("def f():\n    import gangmaster.tools.cli\n", True),
    ("from ..am import master\n", True),        # gangmaster.selectors -> gangmaster.am
    ("from .cluster import ClusterView\n", False),
    ("from gangmaster.gpu_topology.masks import popcount\n", False),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gangmaster.tools.rmsim import core\n", True),
])
def test_the_check_sees_an_upward_import(tmp_path, source, upward):
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "selectors" / "probe.py").write_text(source)
    found = upward_imports(tmp_path)
    assert bool(found) == upward, found


def test_relative_imports_resolve_to_their_layer(tmp_path):
    (tmp_path / "am" / "sub").mkdir(parents=True)
    probe = tmp_path / "am" / "sub" / "probe.py"
    probe.write_text("from ...tools import cli\nfrom .. import master\nfrom ...selectors.cluster import ClusterView\n")
    assert imported_layers(probe, "am", tmp_path) == [(1, "tools"), (2, "am"), (3, "selectors")]
