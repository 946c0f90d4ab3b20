"""`gangmaster bench fgd` runs end to end on a small stream and reports every strategy
against random from the same run; its synthetic stream places real asks (shares, whole
GPUs, CPU-only) that the view books (the figures belong in BENCHMARKS.md)."""
from gangmaster.tools.bench.fgd import openb_like_specs, pod_stream
from gangmaster.tools.cli import main


def test_bench_fgd_small(capsys):
    assert main(["bench", "fgd", "--nodes", "60", "--pods", "400", "--selector", "fgd",
                 "--selector", "best-fit"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert set(rows) == {"random", "fgd", "best-fit"}
    assert rows["random"][5] == "1.00x" and rows["fgd"][1] == "seeded"
    assert all(int(row[6].replace(",", "")) > 0 for row in rows.values())   # pods placed


def test_the_stream_and_cluster_are_openb_like():
    stream = pod_stream(2000, 1)
    shares = sum(1 for ask, _ in stream if ask.gpu_milli)
    cpu_only = sum(1 for ask, _ in stream if not ask.gpus and not ask.gpu_milli)
    assert 0.15 < shares / 2000 < 0.7 and 0 < cpu_only
    specs = openb_like_specs(1213, 1)
    assert len(specs) == 1213 and {s.gpus for s in specs} == {1, 2, 4, 8}
    assert [s.gpus for s in specs] != sorted(s.gpus for s in specs)   # kinds unrelated to name order
