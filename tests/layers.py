"""The layers of gangmaster (DESIGN.md: conf <- gpu_topology <- selectors <- protocol <- am <- tools)
and which of them a module imports, read from its source. Two checks share it: imports
point down only (tests/unit/test_layering.py), and each test file's layer, the highest
one it imports, so that one layer's unit and property tests run alone, in under a minute,
after every change (README: *Tests*):

    HYPOTHESIS_PROFILE=fast python -m pytest -q $(python tests/layers.py am)

``python tests/layers.py LAYER`` prints that layer's files and nothing else: pytest then
imports those alone (collecting the whole suite to pick by a marker costs more than most
layers' tests). The ``fast`` hypothesis profile (tests/conftest.py) draws a fifth of the
examples; the whole suite draws them all."""
from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("conf", "gpu_topology", "selectors", "protocol", "am", "tools")
RANK = {name: rank for rank, name in enumerate(LAYERS)}

#: test files that import no layer (they read the repository's files), and the layer they check
READS_FILES = {
    "test_layering.py": "tools",         # every layer's imports
    "test_layers.py": "tools",           # this file's layers of the test files
    "test_layout.py": "tools",           # the package layout and the installed command
    "test_rm_proto_stubs.py": "protocol",  # protocol/proto's generated stubs
    "test_packaging.py": "tools",        # pyproject.toml against every folder and stub
    "test_rm_private_names.py": "tools.rmsim",  # tools/rmsim's sources, by AST
    "test_domain_owners.py": "tools",    # am/, selectors/ and tools/rmsim's sources, as text
    "test_replay_metrics_golden.py": "tools.replay",  # the replay's metrics against a golden file
    "test_typing.py": "selectors",       # mypy --strict over the plugin API
}


def imported_layers(path: Path, layer: str | None = None, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, imported layer) for every import of a gangmaster layer in ``path``, a module of
    ``layer`` (relative imports resolve against its package; a test file has none)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: level 1 is the module's own package, each further level its parent
                package = ["gangmaster", layer, *path.relative_to(root / layer).parent.parts]
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


#: tools' parts, each a layer of its own for the fast tier (tools has most of the tests): a
#: module's part by its name under gangmaster.tools (the rest, the commands: ``tools.cli``),
#: and a test file's, of those it imports, the last in this order (the most specific)
TOOLS_PARTS = {"tools.cli": (), "tools.rmsim": ("rmsim",), "tools.run": ("job_runner",),
               "tools.snapshots": ("snapshots",), "tools.slurm": ("slurm",), "tools.yarn": ("yarn", "yarn_cmd"),
               "tools.replay": ("replay", "replay_cmd"), "tools.bench": ("bench",)}


def _tools_part(module: str) -> str:
    """The part of tools that ``module`` (a name under gangmaster.tools) is in."""
    first = module.split(".")[0]
    return next((part for part, names in TOOLS_PARTS.items() if first in names), "tools.cli")


def imported_modules(path: Path) -> list[str]:
    """Every module a test file imports absolutely, inside functions too."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


@functools.lru_cache(maxsize=None)
def part_of(path: Path) -> str | None:
    """The fast tier's layer of a test file: its layer (:func:`layer_of`), and for a
    test of tools, the part of tools it tests (:data:`TOOLS_PARTS`)."""
    layer = layer_of(path)
    if layer != "tools":
        return layer
    parts = {_tools_part(name[len("gangmaster.tools."):]) for name in imported_modules(path)
             if name.startswith("gangmaster.tools.")}
    return max(parts, key=list(TOOLS_PARTS).index) if parts else "tools.cli"


@functools.lru_cache(maxsize=None)
def layer_of(path: Path) -> str | None:
    """The layer a test file tests: the highest layer it imports (a test of the AM driven
    by the RM simulator is a test of tools); None when it imports none and is not in
    :data:`READS_FILES`."""
    layers = {layer for _, layer in imported_layers(path)}
    if not layers:
        return READS_FILES.get(path.name)
    return max(layers, key=RANK.__getitem__)


#: what the fast tier runs: a layer but tools, or a part of tools
FAST_TIER = (*LAYERS[:-1], *TOOLS_PARTS)


def unit_and_property_files(root: Path = ROOT) -> list[Path]:
    """Every unit and property test file."""
    return [path for kind in ("unit", "property") for path in sorted((root / "tests" / kind).glob("test_*.py"))]


def layer_files(layer: str, root: Path = ROOT) -> list[Path]:
    """The unit and property test files of ``layer`` (one of :data:`FAST_TIER`, or tools whole)."""
    return [path for path in unit_and_property_files(root)
            if (layer_of(path) if layer == "tools" else part_of(path)) == layer]


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in (*FAST_TIER, "tools"):
        print(f"usage: python tests/layers.py LAYER (one of {', '.join(FAST_TIER)}; tools: all its parts): "
              f"prints that layer's unit and property test files", file=sys.stderr)
        return 2
    print(" ".join(str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
                   for path in layer_files(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
