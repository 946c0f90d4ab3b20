"""No module of the RM simulator reaches into another's private names.

The RM is a set of collaborators (tools/rmsim/core.py's docstring lists them), each the one
owner of its state: another module asks it through its public methods and attributes. A
name with a leading underscore is its owner's alone: read it on ``self`` or ``cls`` inside
its class, or by its own module, never from elsewhere (``core._charge`` from the state file
writer was how its books drifted out of one owner's hands). Checked by reading the source:
an attribute access ``x._name`` on anything but ``self``/``cls``, and an import of a
``_name`` from another module, are refused, but for :data:`ALLOWED`.
"""
import ast
from pathlib import Path

import pytest

RMSIM = Path(__file__).resolve().parents[2] / "tools" / "rmsim"

#: (module file, the access as written) that are allowed, with why. The standard library's
#: ``os._exit`` is its documented way to end a forked child without running the parent's
#: cleanup (the supervisor's fork).
ALLOWED = {
    ("supervisor.py", "os._exit"),
}


def reaches(source: str) -> list[tuple[int, str]]:
    """Each private name ``source`` reaches outside its owner: (line, the access as written)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom):
            found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names if _private(a.name)]
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@pytest.mark.parametrize("source, expected", [
    ("self._x = 1\ncls._y()\n", []),
    ("core._charge(q, a)\n", [(1, "core._charge")]),
    ("self.core._books\n", [(1, "self.core._books")]),
    ("from .core import _NO_NODES\n", [(1, "from core import _NO_NODES")]),
    ("x.__class__\nx.__dict__\n", []),
], ids=["own", "call", "through-self", "import", "dunder"])
def test_the_check_finds_what_reaches_in(source, expected):
    assert reaches(source) == expected


@pytest.mark.parametrize("path", sorted(RMSIM.glob("*.py")), ids=lambda p: p.name)
def test_no_module_reaches_into_private_names(path):
    found = [f"{path.name}:{line}: {access}" for line, access in reaches(path.read_text())
             if (path.name, access) not in ALLOWED]
    assert not found, "private names reached from outside their owner:\n" + "\n".join(found)
