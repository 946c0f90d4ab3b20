"""`gangmaster bench topology` runs end to end on small sizes and reports both
strategies from the same run (the figures themselves belong in BENCHMARKS.md)."""
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
    assert doc["rank"]["nodes"] > 0 and doc["rank"]["baseline"] == "job-packing"
