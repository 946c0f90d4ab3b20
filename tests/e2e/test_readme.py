"""Every snippet in README.md runs, so the README never drifts from the code.

A fenced block is run as its language says:

* ``python``: a fresh interpreter in a scratch folder that sees the repository's
  ``conf/`` (the README's relative paths work there);
* ``sh``: ``bash -eo pipefail`` in the same kind of folder, every line (lines that
  start with ``#`` are the output the README shows);
* ``yaml``: parsed by the reader its ``readme-test`` marker names.

A block that cannot run in a test says so, and why, in an HTML comment on the line
before its fence: ``<!-- readme-test: skip (starts a server that runs until killed) -->``.
Other markers: ``<!-- readme-test: barrier-task -->`` runs the block as every task of a
two-task gang against a real coordinator; ``<!-- readme-test: yaml queues|scenario -->``.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gangmaster.am.barrier.coordinator import TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.server import BarrierServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!--\s*readme-test:\s*(.+?)\s*-->\s*$")


@dataclass
class Block:
    line: int
    language: str
    marker: str
    text: str

    @property
    def id(self) -> str:
        return f"README.md:{self.line}:{self.language or 'text'}"


def readme_blocks() -> list[Block]:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        start = i
        i += 1
        while not lines[i].startswith("```"):
            i += 1
        before = MARKER.match(lines[start - 1]) if start else None
        blocks.append(Block(start + 1, opening.group(1), before.group(1) if before else "",
                            "\n".join(lines[start + 1:i]) + "\n"))
        i += 1
    return blocks


BLOCKS = readme_blocks()


def test_every_block_is_run_or_says_why_not():
    for block in BLOCKS:
        if block.marker.startswith("skip"):
            assert re.match(r"skip \(.+\)$", block.marker), f"{block.id}: a skip needs a reason in ()"
        elif block.language not in ("python", "sh") and block.marker != "yaml" and \
                not block.marker.startswith("yaml "):
            pytest.fail(f"{block.id}: a {block.language or 'plain'} block needs a readme-test marker "
                        f"(python and sh blocks run as they are)")


@pytest.fixture
def scratch(tmp_path):
    (tmp_path / "conf").symlink_to(ROOT / "conf")
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(argv, cwd, env=None, timeout=180):
    done = subprocess.run(argv, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _runnable(language: str) -> list[Block]:
    return [pytest.param(b, id=b.id) for b in BLOCKS if b.language == language and not b.marker]


@pytest.mark.parametrize("block", _runnable("python"))
def test_python_block_runs(block, scratch):
    _run([sys.executable, "-c", block.text], scratch)


@pytest.mark.parametrize("block", _runnable("sh"))
def test_shell_block_runs(block, scratch):
    _run(["bash", "-eo", "pipefail", "-c", block.text], scratch)


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in BLOCKS if b.marker == "barrier-task"])
def test_barrier_task_block_runs_as_every_task_of_a_gang(block, scratch):
    server = BarrierServer(BarrierConfig(retry_give_up_s=30))
    server.start()
    try:
        host = server.address.rsplit(":", 1)[0]
        server.open_attempt("readme", "gang", 1, [TaskInfo(i, host) for i in range(2)])
        procs = [subprocess.Popen([sys.executable, "-c", block.text], cwd=scratch, text=True,
                                  env={**_env(), **server.task_env("readme", "gang", 1, i)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
        results = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        server.stop(grace=0)
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in BLOCKS if b.marker.startswith("yaml ")])
def test_yaml_block_is_accepted_by_its_reader(block, scratch):
    from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
    from gangmaster.tools.rmsim.ledger import NodeLedger
    from gangmaster.tools.rmsim.queues import load_queues
    from gangmaster.tools.rmsim.scenario import Scenario

    path = scratch / "block.yaml"
    path.write_text(block.text)
    kind = block.marker.split()[1]
    if kind == "queues":
        assert load_queues(str(path), NodeLedger(load_cluster_specs(default_cluster_path())))
    elif kind == "scenario":
        hosts = {spec.host for spec in load_cluster_specs(default_cluster_path())}
        assert Scenario.load(str(path), hosts).steps
    else:
        pytest.fail(f"{block.id}: unknown yaml kind {kind!r}")
