"""Imports point down only (DESIGN.md): conf <- gpu_topology <- selectors <- protocol <- am <- tools.

The protocol (the AM–RM messages, codec, client, stubs and gRPC security) sits below the AM,
as YARN keeps its API below both the AM and the RM: the AM and the RM simulator stand on it.

Every import is checked, including those inside functions and under TYPE_CHECKING: a
type-only upward import still ties a lower layer to a higher one."""
from pathlib import Path

import pytest

from layers import LAYERS, RANK, ROOT, imported_layers


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
    ("from gangmaster.am.spec.jobspec import load_job\n", True),
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


@pytest.mark.parametrize("source, upward", [
    ("from gangmaster.am.core.master import ApplicationMaster\n", True),   # the protocol is below the AM
    ("from ..tools.rmsim import faults\n", True),
    ("from gangmaster.selectors.cluster import ClusterView\n", False),
    ("from .rm_protocol import NodeReport\n", False),
])
def test_the_protocol_sees_neither_the_am_nor_tools(tmp_path, source, upward):
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "protocol" / "probe.py").write_text(source)
    found = upward_imports(tmp_path)
    assert bool(found) == upward, found


def test_relative_imports_resolve_to_their_layer(tmp_path):
    (tmp_path / "am" / "sub").mkdir(parents=True)
    probe = tmp_path / "am" / "sub" / "probe.py"
    probe.write_text("from ...tools import cli\nfrom .. import master\nfrom ...selectors.cluster import ClusterView\n")
    assert imported_layers(probe, "am", tmp_path) == [(1, "tools"), (2, "am"), (3, "selectors")]
