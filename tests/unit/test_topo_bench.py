"""`gangmaster bench topology` runs end to end on small sizes and reports both
strategies from the same run (the figures themselves belong in BENCHMARKS.md), on
the cluster state it says it measures."""
import json

from gangmaster.tools.cli import main


def test_bench_topology_json(capsys):
    argv = ["bench", "topology", "--trials", "30", "--steps", "60", "--calls", "30", "--nodes", "300",
            "--presets", "dgx1-v100,pcie-4gpu", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["preset"] for r in doc["quality"]} == {"dgx1-v100", "pcie-4gpu"}
    for row in doc["quality"]:
        # same free masks for both: the best set can never score below the lowest bits
        assert row["mean_score_topology"] >= row["mean_score_lowest"]
        assert row["nvlink_share_topology"] >= row["nvlink_share_lowest"] or not row["has_nvlink"]
    assert {r["preset"] for r in doc["churn"]} == {"dgx1-v100", "pcie-4gpu"}
    assert [r["gpus"] for r in doc["latency"]] == [8, 16, 16]
    assert all(r["mean_us"] > 0 and r["lowest_bits_mean_us"] > 0 for r in doc["latency"])
    assert doc["rank"]["baseline"] == "job-packing"


def test_bench_topology_ranks_a_partly_used_cluster(capsys):
    """rank() is timed on a cluster whose GPUs are about half in use (each busy with
    probability 1/2), as the view itself and a select() on it see it: the ranked nodes
    are those select() lets through for the 2-GPU request, fewer than the 200 GPU nodes."""
    argv = ["bench", "topology", "--trials", "1", "--steps", "1", "--calls", "1", "--nodes", "300",
            "--presets", "pcie-4gpu", "--json"]
    assert main(argv) == 0
    rank = json.loads(capsys.readouterr().out)["rank"]
    assert rank["cluster_nodes"] == 300 and rank["gpus"] == 100 * 8 + 100 * 4
    assert 0.4 < rank["gpus_used"] / rank["gpus"] < 0.6, rank
    assert 0 < rank["nodes"] == rank["select_survivors"] < 200, rank
