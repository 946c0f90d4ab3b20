"""``gangmaster snapshot``: what a real cluster's dump says, and exit 2 on a bad one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gangmaster.tools.cli import main
from gangmaster.tools.snapshots import FORMATS, fields_read

EXAMPLES = Path(__file__).resolve().parents[2] / "conf" / "snapshots"


def run(capsys, *argv):
    status = main(["snapshot", *map(str, argv)])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_summary_of_the_slurm_example(capsys):
    status, out, _ = run(capsys, "--time", 1795415335, *sorted((EXAMPLES / "slurm").glob("*.json")))
    assert status == 0
    assert out.splitlines()[0].startswith("slurm snapshot: 4 nodes, 2 unavailable, 4 jobs running; "
                                          "taken 2026-11-23 06:28:55 UTC (given)")
    assert "  2 x 16 vcores, 64,000 MB, 8 GPUs v100, rack rack1" in out
    assert "  dgx2: DRAIN (ECC errors on GPU 3)" in out
    assert "  trainer: 1 host, 4 vcores, 8,000 MB, 2 GPUs; ends within 1h57m" in out


def test_json_lists_every_node_and_allocation(capsys):
    status, out, _ = run(capsys, "--json", *sorted((EXAMPLES / "kubernetes").glob("*.json")))
    doc = json.loads(out)
    assert status == 0 and doc["format"] == "kubernetes"
    nodes = {n["host"]: n for n in doc["nodes"]}
    assert nodes["gpu-node-4"]["unavailable"] == "cordoned" and nodes["gpu-node-1"]["unavailable"] is None
    assert nodes["gpu-node-1"]["gpus"] == 8 and nodes["gpu-node-1"]["vcores"] == 95.5
    assert sum(a["gpus"] for a in doc["running"] if a["job"] == "team-a/llm-pretrain") == 12


def test_fields_read_per_engine(capsys):
    status, out, _ = run(capsys, "--fields", "--json")
    assert status == 0 and json.loads(out) == {engine: list(fields_read(engine)) for engine in FORMATS}


def test_bad_input_exits_2_naming_the_file(capsys, tmp_path):
    bad = tmp_path / "nodes.json"
    bad.write_text('{"nodes": {"node": [{"nodeHostName": "h", "totalResource": {"memory": "lots"}}]}}')
    status, out, err = run(capsys, bad)
    assert status == 2 and out == ""
    assert err.strip() == f'gangmaster: {bad}: nodes.node[0].totalResource.memory: expected a number >= 0, got "lots"'


def test_no_files_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["snapshot"])
    assert exited.value.code == 2
    assert "give the snapshot files" in capsys.readouterr().err


def test_bench_snapshot_makes_a_valid_snapshot_of_every_engine(capsys):
    cluster = Path(__file__).resolve().parents[1] / "fixtures" / "rm" / "cluster.yaml"
    assert main(["bench", "snapshot", "--cluster", str(cluster), "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(FORMATS)
    for line in lines:
        assert "load_snapshot" in line and "floor json.loads" in line
