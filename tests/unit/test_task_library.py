"""The task-side library (gangmaster.am.task) is what training processes import: its
``__all__`` is a promise, every name in it is there, it stays light (no AM, no numpy), and
the old import paths of README-era scripts still reach the same objects."""
import ast
from pathlib import Path

import pytest

import gangmaster.am.task as task

#: the library's public names: a change here is a change users see
PROMISED = {
    "BarrierTaskContext", "TaskInfo",
    "BarrierId", "BarrierError", "BarrierTimeout", "StaleAttempt", "AttemptFailed", "StaleEpoch",
    "BarrierMismatch", "BarrierAuthError", "BarrierInvalid", "MessageTooLarge", "CoordinatorUnavailable",
    "REQUIRED_ENV", "ENV_ADDRESS", "ENV_TOKEN", "ENV_JOB", "ENV_GANG", "ENV_ATTEMPT", "ENV_TASK_INDEX",
    "ENV_TASK_COUNT", "ENV_ROLE", "ENV_ROLE_INDEX", "ENV_PAI_ROLE", "ENV_PAI_ROLE_INDEX", "ENV_TLS_CA",
    "ENV_LOG_INTERVAL", "ENV_RETRY_GIVE_UP", "ENV_MAX_MESSAGE", "ENV_LOCAL_GROUP", "ENV_TREE", "ENV_PREEMPTION_NOTICE",
}


def test_all_is_the_promised_names_each_once():
    assert len(task.__all__) == len(set(task.__all__))
    assert set(task.__all__) == PROMISED


def test_every_name_in_all_is_defined_and_star_import_gives_exactly_them():
    namespace = {}
    exec("from gangmaster.am.task import *", namespace)
    assert set(namespace) - {"__builtins__"} == PROMISED
    assert all(namespace[name] is getattr(task, name) for name in PROMISED)


def test_every_error_is_a_barrier_error():
    errors = [getattr(task, name) for name in task.__all__ if isinstance(getattr(task, name), type)
              and issubclass(getattr(task, name), Exception)]
    assert len(errors) == 10 and all(issubclass(error, task.BarrierError) for error in errors)


#: what a training process must not load by importing the library
HEAVY = ("gangmaster.am.core", "gangmaster.am.ops", "gangmaster.am.spec", "gangmaster.tools", "numpy", "networkx",
         "prometheus_client")
ROOT = Path(__file__).resolve().parents[2]


def _source(module: str) -> Path | None:
    """The file of a gangmaster module in this checkout (None: not one of ours)."""
    if not module.startswith("gangmaster."):
        return None
    base = ROOT.joinpath(*module.split(".")[1:])
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def imports_of(module: str) -> set[str]:
    """Every module that importing ``module`` can load, read from the sources (imports inside
    functions too: a call can load them), without importing anything."""
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        path = _source(name)
        if name in seen or path is None:
            seen.add(name)
            continue
        seen.add(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*parent, *([base] if base else [])])
                todo.append(base)
                todo += [f"{base}.{alias.name}" for alias in node.names if _source(f"{base}.{alias.name}")]
    return seen


def test_the_library_is_light():
    assert sorted(name for name in imports_of("gangmaster.am.task") if name.startswith(HEAVY)) == []


def test_the_lightness_check_sees_a_heavy_import():
    assert any(name.startswith("numpy") for name in imports_of("gangmaster.selectors.ask_scores"))


@pytest.mark.parametrize("old_module, name", [
    ("gangmaster.am.context", "BarrierTaskContext"),
    ("gangmaster.am.context", "TaskInfo"),
    ("gangmaster.am.context", "ENV_TASK_INDEX"),
    ("gangmaster.am.barrier_errors", "BarrierError"),
    ("gangmaster.am.barrier_errors", "StaleAttempt"),
    ("gangmaster.am.barrier_errors", "BarrierTimeout"),
])
def test_the_old_import_paths_reach_the_same_objects(old_module, name):
    module = __import__(old_module, fromlist=[name])
    assert getattr(module, name) is getattr(task, name)
