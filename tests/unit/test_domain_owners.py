"""The domain layers keep the shape issue 29 gave them, checked by reading the source.

* The gang owns its state: the AM never assigns a gang's (or anything's) ``.state``;
  recovery rebuilds gangs through their own transitions and knows nothing of the AM.
* The AM keeps construction and the job's verdict (a bound on master.py's lines); journal
  and log attach as observers, and only attaching them asks what they keep.
* ``am/`` and ``selectors/`` are no replay's tuning: where a trace replay is why code is
  as it is, a docstring (or a ``#:`` attribute doc) says so; a plain ``#`` comment that
  names the replay is code written for one driver.
"""
import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def state_assignments(source: str) -> list[int]:
    """The lines of ``source`` that assign an attribute named ``state``."""
    return [t.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Assign, ast.AugAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Attribute) and t.attr == "state"]


def imports_of(source: str) -> set[str]:
    """Every module and name ``source`` imports, as written (``.master``, ``ApplicationMaster``)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
            names.update(a.name for a in node.names)
    return names


def keeper_checks(source: str) -> list[int]:
    """The lines of ``source`` that ask whether a journal or a log keeps anything (read
    ``keeps_nothing``, as an attribute or by name)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr == "keeps_nothing" and isinstance(node.ctx, ast.Load)
            or isinstance(node, ast.Constant) and node.value == "keeps_nothing"]


def replay_comments(source: str) -> list[int]:
    """The lines of ``source`` whose ``#`` comment (not a ``#:`` attribute doc) names a replay."""
    return [tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT and not tok.string.startswith("#:")
            and re.search(r"\breplay", tok.string, re.I)]


@pytest.mark.parametrize("source, expected", [
    ("gang.state = ROLE_RUNNING\n", [1]),
    ("x = 1\nself.gangs[0].state = s\n", [2]),
    ("state = 1\nself.states = 2\nif g.state is s: pass\n", []),
], ids=["assigned", "through-index", "read-only"])
def test_the_state_check_finds_assignments(source, expected):
    assert state_assignments(source) == expected


@pytest.mark.parametrize("source, expected", [
    ("if journal.keeps_nothing:\n    pass\n", [1]),
    ("x = 1\nquiet = getattr(log, 'keeps_nothing', False)\n", [2]),
    ("class QuietLog:\n    keeps_nothing = True\n", []),
], ids=["attribute", "getattr", "declared"])
def test_the_keeper_check_finds_questions(source, expected):
    assert keeper_checks(source) == expected


@pytest.mark.parametrize("source, expected", [
    ("x = 1   # a replay opens thousands\n", [1]),
    ("# Replayed jobs share roles\nx = 1\n", [1]),
    ('def f():\n    """A trace replay calls it."""\n', []),
    ("#: thousands in a replay\nx = 1\n", []),
    ("x = 'replay'   # the command's name\n", []),
], ids=["trailing", "own-line", "docstring", "attribute-doc", "string"])
def test_the_comment_check_finds_replay_comments(source, expected):
    assert replay_comments(source) == expected


def test_the_am_assigns_no_state():
    assert state_assignments((ROOT / "am/core/master.py").read_text()) == []


#: The most lines the AM's module holds (issue 29: "ApplicationMaster keeps construction and the
#: job's verdict (about 250 lines)"): past it, something that is neither has come back to it.
MASTER_MAX_LINES = 260


def test_the_am_keeps_construction_and_verdict_only():
    lines = len((ROOT / "am/core/master.py").read_text().splitlines())
    assert lines <= MASTER_MAX_LINES, f"am/core/master.py: {lines} lines, over {MASTER_MAX_LINES}"


def test_only_attaching_the_observers_asks_what_they_keep():
    """Journal, log and metrics attach as observers (:func:`gangmaster.am.core.gang_events.observers`):
    nothing that decides asks whether they are there."""
    asking = {str(p.relative_to(ROOT)): keeper_checks(p.read_text()) for top in ("am", "selectors")
              for p in (ROOT / top).rglob("*.py") if not p.name.endswith("_pb2.py")}
    assert sorted(path for path, lines in asking.items() if lines) == ["am/core/gang_events.py"]


def test_recovery_imports_nothing_of_the_am():
    imported = imports_of((ROOT / "am/core/recovery.py").read_text())
    assert not {n for n in imported if n.endswith("master") or n == "ApplicationMaster"}


@pytest.mark.parametrize("path", sorted(p for top in ("am", "selectors") for p in (ROOT / top).rglob("*.py")
                                        if not p.name.endswith("_pb2.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_code_comment_names_the_replay(path):
    assert replay_comments(path.read_text()) == [], f"{path.relative_to(ROOT)}: say why in a docstring"


#: The most lines a module of the RM simulator holds (issue 29: "no file of tools/rmsim/ over
#: ~350 lines"): past it, a collaborator holds more than one thing.
RMSIM_MAX_LINES = 350


@pytest.mark.parametrize("path", sorted((ROOT / "tools/rmsim").glob("*.py")), ids=lambda p: p.name)
def test_no_rm_simulator_module_is_over_its_size(path):
    lines = len(path.read_text().splitlines())
    assert lines <= RMSIM_MAX_LINES, f"tools/rmsim/{path.name}: {lines} lines, over {RMSIM_MAX_LINES}"
