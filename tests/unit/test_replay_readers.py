"""The trace readers: golden job tables from the shipped fixtures, the Philly gang-split
rule, bad rows named by file, line and field, and ``--on-bad-row skip``."""
from datetime import datetime
from pathlib import Path

import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.tools.replay.clusters import from_tiresias_spec
from gangmaster.tools.replay.readers import detect_format, read_trace
from gangmaster.tools.replay.trace import NodeShape, TraceRole, sha256_of
from gangmaster.tools.replay.trace_csv import BadRow, BadRows, parse_window

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
SHARED_TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
EIGHT = NodeShape(8, 80.0, 524288)


def shape_of(table):
    return [(job.job_id, job.submit_s, job.duration_s, job.queue,
             [(r.name, r.instances, r.gpus) for r in job.roles]) for job in table.jobs]


def test_philly_golden_table():
    table = read_trace(FIXTURES / "philly_small.csv", "philly", EIGHT)
    assert table.format == "philly" and table.origin == datetime(2017, 10, 1, 0, 0, 0)
    assert table.sha256 == sha256_of((FIXTURES / "philly_small.csv").read_bytes())
    assert shape_of(table) == [
        ("L0000003", 0.0, 3600.0, "vc-a", [("worker", 1, 8)]),
        ("L0000004", 300.0, 1200.0, "vc-b", [("worker", 2, 8)]),             # 16 = 2 x 8
        ("L0000005", 300.0, 300.0, "vc-b", [("worker", 1, 8), ("rest", 1, 4)]),   # 12 = 8 + 4
        ("L0000002", 600.0, 600.0, "vc-a", [("worker", 1, 1)]),
        ("L0000006", 1200.0, 60.0, "vc-a", [("worker", 1, 2)]),
        ("L0000007", 3600.0, 1800.0, "vc-b", [("worker", 1, 4)]),
        ("L0000008", 5400.0, 90.0, "vc-a", [("worker", 1, 1)]),
        ("L0000009", 7200.0, 7200.0, "vc-b", [("worker", 4, 8)]),
    ]
    assert [job.gpus for job in table.jobs] == [8, 16, 12, 1, 2, 4, 1, 32]


def test_philly_instances_get_their_gpus_share_of_the_node():
    table = read_trace(FIXTURES / "philly_small.csv", "philly", EIGHT)
    rest = table.jobs[2].roles[1]
    assert rest == TraceRole("rest", 1, 4, 40.0, 262144)


def test_philly_split_follows_the_clusters_node_size():
    table = read_trace(FIXTURES / "philly_small.csv", "philly", NodeShape(4, 40.0, 65536))
    by_id = {job.job_id: [(r.instances, r.gpus) for r in job.roles] for job in table.jobs}
    assert by_id["L0000005"] == [(3, 4)]                # 12 GPUs on 4-GPU nodes
    assert by_id["L0000009"] == [(8, 4)]
    assert by_id["L0000006"] == [(1, 2)]


def test_window_keeps_jobs_submitted_inside_it_and_counts_from_its_start():
    window = parse_window("2017-10-01 00:05:00", "2017-10-01 01:00:00", dated=True)
    table = read_trace(FIXTURES / "philly_small.csv", "philly", EIGHT, window=window)
    assert [(job.job_id, job.submit_s) for job in table.jobs] == [
        ("L0000004", 0.0), ("L0000005", 0.0), ("L0000002", 300.0), ("L0000006", 900.0), ("L0000007", 3300.0)]
    assert table.origin == datetime(2017, 10, 1, 0, 5, 0)


def test_bad_rows_stop_at_the_first_naming_file_line_and_field():
    with pytest.raises(BadRow) as caught:
        read_trace(FIXTURES / "philly_bad_rows.csv", "philly", EIGHT)
    assert str(caught.value).startswith(f"{FIXTURES / 'philly_bad_rows.csv'}: line 3: num_gpus: expected an integer")
    assert caught.value.line == 3 and caught.value.column == "num_gpus"


def test_bad_rows_skip_counts_them_and_keeps_the_rest():
    bad = BadRows("skip")
    table = read_trace(FIXTURES / "philly_bad_rows.csv", "philly", EIGHT, bad)
    assert [job.job_id for job in table.jobs] == ["L0000002", "L0000009"]
    assert bad.count == 6
    assert [(e.line, e.column) for e in bad.first] == [(3, "num_gpus"), (4, "gpu_time"), (5, "timestamp"),
                                                      (6, "duration"), (7, "")]
    summary = bad.summary()
    assert summary.startswith("skipped 6 bad rows; first:") and "... and 1 more" in summary
    assert "line 4: gpu_time: expected duration × num_gpus = 1200" in summary


@pytest.mark.parametrize("text, where", [
    ("timestamp,duration,num_gpus,cluster\n", "line 1"),                       # no gpu_time column
    ("timestamp,duration,num_gpus,gpu_time,cluster,user\n", "line 1"),          # unknown column
    ("", "line 1"),
])
def test_a_bad_header_is_an_error_of_the_whole_file_even_when_skipping(tmp_path, text, where):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"t.csv: {where}: expected"):
        read_trace(path, "philly", EIGHT, BadRows("skip"))


def test_a_trace_that_is_not_a_regular_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="a regular file, not a directory"):
        read_trace(tmp_path, "philly", EIGHT)


def test_tiresias_golden_table_and_spec():
    cluster = from_tiresias_spec(FIXTURES / "tiresias_n4g4.csv")
    assert [(s.host, s.rack, s.gpus, s.vcores, s.memory_mb) for s in cluster.specs] == [
        ("s0-n000", "switch-0", 4, 40.0, 262144), ("s0-n001", "switch-0", 4, 40.0, 262144),
        ("s1-n000", "switch-1", 4, 40.0, 262144), ("s1-n001", "switch-1", 4, 40.0, 262144)]
    table = read_trace(FIXTURES / "tiresias_small.csv", "tiresias", cluster.gpu_node_shape())
    assert table.origin is None and len(table) == 12
    assert shape_of(table)[:3] == [("0", 0.0, 164.0, "default", [("worker", 1, 1)]),
                                   ("1", 30.0, 147.0, "default", [("worker", 2, 4)]),
                                   ("2", 53.0, 127.0, "default", [("worker", 1, 2)])]
    assert shape_of(table)[10] == ("10", 260.0, 200.0, "default", [("worker", 1, 4), ("rest", 1, 2)])
    assert table.jobs[0].roles[0].vcores == 10.0 and table.jobs[0].roles[0].memory_mb == 65536


def test_tiresias_duplicate_job_id_is_a_bad_row(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,num_gpu,submit_time,duration\n7,1,0,10\n7,1,5,10\n")
    with pytest.raises(BadRow, match="line 3: job_id: expected a job id not used before \\(line 2 has it\\)"):
        read_trace(path, "tiresias", EIGHT)


@pytest.mark.parametrize("name", ["native_small.csv", "native_small.yaml"])
def test_native_csv_and_yaml_read_the_same_multi_role_jobs(name):
    table = read_trace(FIXTURES / name, "native", EIGHT)
    assert shape_of(table) == [
        ("ps-1", 0.0, 3600.0, "research", [("ps", 2, 0), ("worker", 4, 2)]),
        ("mpi", 5.0, 120.0, "batch", [("worker", 2, 8)]),
        ("single", 10.0, 60.0, "default", [("worker", 1, 1)]),
    ]
    ps, worker = table.jobs[0].roles
    assert (ps.vcores, ps.memory_mb, ps.gpu_types) == (4.0, 16384, ())
    assert (worker.vcores, worker.memory_mb, worker.gpu_types) == (20.0, 131072, ("V100", "A100"))


@pytest.mark.parametrize("rows, expected", [
    ("a,0,10,q,w,1,1,,,\na,5,10,q,x,1,1,,,\n", "line 3: submit_s: expected the value of this job's first row"),
    ("a,0,10,q,w,1,1,,,\na,0,10,q,w,1,1,,,\n", "line 3: role: expected a role name not used before"),
    ("a,0,10,q,ps,1,0,,,\n", "line 2: vcores: expected vcores or memory_mb for a role without GPUs"),
    ("a,0,10,q,w,1,65,,,\n", r"line 2: gpus: expected an integer >= 0 and <= 64 \(MAX_GPUS_PER_NODE\)"),
])
def test_native_csv_bad_rows(tmp_path, rows, expected):
    path = tmp_path / "n.csv"
    path.write_text("job_id,submit_s,duration_s,queue,role,instances,gpus,vcores,memory_mb,gpu_types\n" + rows)
    with pytest.raises(BadRow, match=expected):
        read_trace(path, "native", EIGHT)


def test_native_csv_skip_drops_the_whole_job_of_a_bad_row(tmp_path):
    path = tmp_path / "n.csv"
    path.write_text("job_id,submit_s,duration_s,gpus,role\na,0,10,1,w\na,0,10,x,v\nb,1,10,1,w\n")
    bad = BadRows("skip")
    table = read_trace(path, "native", EIGHT, bad)
    assert [job.job_id for job in table.jobs] == ["b"] and bad.count == 1


def test_native_yaml_errors_name_the_job_and_field(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text("jobs:\n  - {id: a, submit: 0, duration: 10, roles: [{gpus: -1}]}\n")
    with pytest.raises(ConfigError, match=r"n.yaml: jobs\[0\].roles\[0\].gpus: expected an integer >= 0"):
        read_trace(path, "native", EIGHT)


@pytest.mark.parametrize("name, format", [("philly_small.csv", "philly"), ("tiresias_small.csv", "tiresias"),
                                          ("native_small.csv", "native"), ("native_small.yaml", "native")])
def test_format_is_detected_from_the_header(name, format):
    assert detect_format(FIXTURES / name) == format


@pytest.mark.skipif(not (SHARED_TRACES / "philly" / "philly.csv").exists(), reason="shared/traces not present")
def test_the_full_philly_trace_reads_whole():
    table = read_trace(SHARED_TRACES / "philly" / "philly.csv", "philly", EIGHT)
    assert len(table) == 82247
    sizes = {}
    for job in table.jobs:
        sizes[job.gpus] = sizes.get(job.gpus, 0) + 1
    assert sizes == {1: 76627, 2: 1818, 4: 1870, 8: 1643, 12: 7, 16: 199, 24: 7, 32: 67, 64: 6, 128: 3}


def test_a_trace_past_the_row_limit_is_refused_whatever_on_bad_row_says(tmp_path, monkeypatch):
    import gangmaster.tools.replay.trace_csv as trace_csv
    monkeypatch.setattr(trace_csv, "MAX_TRACE_JOBS", 3)
    with pytest.raises(ConfigError, match=r"philly_small.csv: line 5: expected at most 3 rows \(MAX_TRACE_JOBS"):
        read_trace(FIXTURES / "philly_small.csv", "philly", EIGHT, BadRows("skip"))


def test_a_trace_past_the_size_limit_is_refused(monkeypatch):
    import gangmaster.tools.replay.trace_csv as trace_csv
    monkeypatch.setattr(trace_csv, "MAX_TRACE_FILE_BYTES", 100)
    with pytest.raises(ConfigError, match=r"expected a file of at most 100 bytes \(MAX_TRACE_FILE_BYTES"):
        read_trace(FIXTURES / "philly_small.csv", "philly", EIGHT)


def test_the_helios_preset_has_each_vc_on_its_own_nodes_in_one_rack():
    from gangmaster.tools.replay.clusters import HELIOS_VC_NODES, preset
    cluster = preset("philly-helios-11vc").build()
    assert len(cluster.specs) == 352 and cluster.capacity_gpus == 352 * 8
    for vc, nodes in HELIOS_VC_NODES.items():
        hosts = cluster.queue_hosts[vc]
        assert len(hosts) == nodes and all(h.startswith(vc + "-") for h in hosts)
        assert {s.rack for s in cluster.specs if s.host in set(hosts)} == {vc}
