"""The trace readers: golden job tables from the shipped fixtures, the Philly gang-split
rule, bad rows named by file, line and field, and ``--on-bad-row skip``."""
from datetime import datetime
from pathlib import Path

import re

import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.conf.limits import MAX_TRACE_FIELD_CHARS
from gangmaster.tools.replay.clusters import from_tiresias_spec
from gangmaster.tools.replay.openb import read_openb_nodes, read_openb_pods
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


ASKS_NOTHING = r"line 2: vcores: expected vcores > 0 or memory_mb > 0 for a role without GPUs \(it would ask for"


@pytest.mark.parametrize("rows, expected", [
    ("a,0,10,q,w,1,1,,,\na,5,10,q,x,1,1,,,\n", "line 3: submit_s: expected the value of this job's first row"),
    ("a,0,10,q,w,1,1,,,\na,0,10,q,w,1,1,,,\n", "line 3: role: expected a role name not used before"),
    ("a,0,10,q,ps,1,0,,,\n", ASKS_NOTHING),
    ("a,0,10,q,ps,1,0,0,0,\n", ASKS_NOTHING),        # zeros ask for nothing as much as empty fields do
    ("a,0,10,q,ps,1,0,0,,\n", ASKS_NOTHING),
    ("a,0,10,q,w,1,1,,,;;\n", r"line 2: gpu_types: expected names separated by ';' \(empty: any\), each of 1..255"),
    ("a,0,10,q,w,1,1,,,V100;;T4\n", r"line 2: gpu_types: expected names separated by ';'.*got \"V100;;T4\""),
    ("a,0,10,q,w,1,1,,,V 100\n", r"line 2: gpu_types: expected names separated by ';'"),
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


@pytest.mark.parametrize("role", ["{gpus: 0}", "{gpus: 0, vcores: 0, memoryMB: 0}", "{vcores: 0}"])
def test_a_native_yaml_role_that_asks_for_nothing_is_refused(tmp_path, role):
    path = tmp_path / "n.yaml"
    path.write_text(f"jobs:\n  - {{id: a, submit: 0, duration: 10, roles: [{role}]}}\n")
    with pytest.raises(ConfigError, match=r"n.yaml: jobs\[0\].roles\[0\].vcores: expected vcores > 0 or memoryMB > 0 "
                                          r"for a role without GPUs \(it would ask for nothing\)"):
        read_trace(path, "native", EIGHT)


def test_native_yaml_errors_name_the_job_and_field(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text("jobs:\n  - {id: a, submit: 0, duration: 10, roles: [{gpus: -1}]}\n")
    with pytest.raises(ConfigError, match=r"n.yaml: jobs\[0\].roles\[0\].gpus: expected an integer >= 0"):
        read_trace(path, "native", EIGHT)


NATIVE_PRIORITIES = [
    # (file name, text, each job's priority or the message of the refusal)
    ("n.csv", "job_id,submit_s,duration_s,gpus,priority\na,0,10,1,5\nb,1,10,1,\nc,2,10,1,-3\n", [5, 0, -3]),
    ("n.csv", "job_id,submit_s,duration_s,gpus,role,priority\na,0,10,1,w,5\na,0,10,1,v,4\n",
     "line 3: priority: expected the value of this job's first row (line 2): 5"),
    ("n.csv", "job_id,submit_s,duration_s,gpus,priority\na,0,10,1,1001\n",
     "line 2: priority: expected an integer >= -1000 and <= 1,000 (MAX_PRIORITY)"),
    ("n.yaml", "jobs:\n  - {id: a, submit: 0, duration: 10, priority: 7, roles: [{gpus: 1}]}\n", [7]),
    ("n.yaml", "jobs:\n  - {id: a, submit: 0, duration: 10, priority: x, roles: [{gpus: 1}]}\n",
     "jobs[0].priority: expected an integer >= -1000"),
]


@pytest.mark.parametrize("name, text, expected", NATIVE_PRIORITIES)
def test_native_traces_give_each_job_its_priority(tmp_path, name, text, expected):
    path = tmp_path / name
    path.write_text(text)
    if isinstance(expected, str):
        with pytest.raises(ConfigError, match=re.escape(expected)):
            read_trace(path, "native", EIGHT)
    else:
        assert [job.priority for job in read_trace(path, "native", EIGHT).jobs] == expected


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


def test_a_trace_past_the_job_limit_is_refused_whatever_on_bad_row_says(tmp_path, monkeypatch):
    import gangmaster.tools.replay.trace_csv as trace_csv
    monkeypatch.setattr(trace_csv, "MAX_TRACE_JOBS", 3)
    with pytest.raises(ConfigError, match=r"philly_small.csv: line 5: expected at most 3 jobs \(MAX_TRACE_JOBS "
                                          r"in conf/limits.py\); replay a part of the trace with --window START END, "
                                          r"or split the file"):
        read_trace(FIXTURES / "philly_small.csv", "philly", EIGHT, BadRows("skip"))


@pytest.mark.parametrize("name, format, start, end", [
    ("philly_small.csv", "philly", "2017-10-01 00:05:00", "2017-10-01 00:05:00"),
    ("tiresias_small.csv", "tiresias", "30", "60"),
    ("native_small.csv", "native", "5", "10"),
    ("native_small.yaml", "native", "5", "10"),
])
def test_the_job_limit_counts_the_jobs_inside_the_window_not_the_rows_of_the_file(monkeypatch, name, format,
                                                                                  start, end):
    """The hint of the limit (--window) helps: rows outside the window are read and let go."""
    import gangmaster.tools.replay.trace_csv as trace_csv
    monkeypatch.setattr(trace_csv, "MAX_TRACE_JOBS", 2)
    with pytest.raises(ConfigError, match="expected at most 2 jobs"):
        read_trace(FIXTURES / name, format, EIGHT)
    window = parse_window(start, end, dated=format == "philly")
    assert len(read_trace(FIXTURES / name, format, EIGHT, window=window)) == 2


def test_a_window_past_the_job_limit_says_so(monkeypatch):
    import gangmaster.tools.replay.trace_csv as trace_csv
    monkeypatch.setattr(trace_csv, "MAX_TRACE_JOBS", 1)
    window = parse_window("2017-10-01 00:05:00", "2017-10-01 00:20:00", dated=True)
    with pytest.raises(ConfigError, match=r"line 4: expected at most 1 jobs submitted in --window "
                                          r"2017-10-01 00:05:00 \.\. 2017-10-01 00:20:00 \(MAX_TRACE_JOBS in "
                                          r"conf/limits.py\); narrow --window, or split the file"):
        read_trace(FIXTURES / "philly_small.csv", "philly", EIGHT, window=window)


# ------------------------------------------------------------------ fields past the limit (D1)
#: (format, header, a good row, the row with FIELD in one column, that column)
LONG_FIELD_CASES = [
    ("philly", "timestamp,duration,num_gpus,gpu_time,cluster", "2017-10-01 00:00:00,60,1,60,vc",
     "2017-10-01 00:00:00,60,1,60,FIELD", "cluster"),
    ("tiresias", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval", "0,1,0,6,vgg,10,3",
     "1,1,0,6,FIELD,10,3", "model_name"),
    ("native", "job_id,submit_s,duration_s,gpus,queue", "a,0,10,1,q", "b,0,10,1,FIELD", "queue"),
    ("openb", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time",
     "p0,1000,1024,1,1000,,0,10", 'p1,1000,1024,1,1000,"FIELD",0,10', "gpu_spec"),
]


@pytest.mark.parametrize("format, header, good, bad, column", LONG_FIELD_CASES)
@pytest.mark.parametrize("chars", [5_000, 200_000])    # below and past the csv module's own limit (131,072)
def test_a_field_past_the_limit_is_a_bad_row_naming_its_line_and_column(tmp_path, format, header, good, bad,
                                                                        column, chars):
    path = tmp_path / "t.csv"
    path.write_text(f"{header}\n{bad.replace('FIELD', 'x' * chars)}\n{good}\n")
    with pytest.raises(BadRow) as caught:
        read_trace(path, format, EIGHT)
    assert str(caught.value).startswith(
        f"{path}: line 2: {column}: expected a field of at most {MAX_TRACE_FIELD_CHARS:,} characters "
        f"(MAX_TRACE_FIELD_CHARS), got \"xxx")
    assert f"({chars:,} characters)" in str(caught.value)
    bad_rows = BadRows("skip")
    assert len(read_trace(path, format, EIGHT, bad_rows)) == 1 and bad_rows.count == 1   # the row after is read


@pytest.mark.parametrize("chars", [5_000, 200_000])
def test_an_openb_node_list_field_past_the_limit_is_refused(tmp_path, chars):
    path = tmp_path / "nodes.csv"
    path.write_text(f"sn,cpu_milli,memory_mib,gpu,model\nn0,8000,1024,2,{'V' * chars}\n")
    with pytest.raises(ConfigError, match=r"nodes.csv: line 2: model: expected a field of at most 4,096 "):
        read_openb_nodes(path)


def test_a_header_field_past_the_limit_is_refused(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("timestamp," + "c" * 200_000 + "\n")
    with pytest.raises(ConfigError, match=r"t.csv: line 1: field 2: expected a field of at most 4,096"):
        read_trace(path, "philly", EIGHT)


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_lines_are_counted_as_an_editor_counts_them_whatever_the_line_ends(tmp_path, end):
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster", "2017-10-01 00:00:00,60,1,60,vc",
            '2017-10-01 00:00:00,60,1,60,"v' + "c" * 200_000 + '"', "2017-10-01 00:00:00,60,x,60,vc"]
    path = tmp_path / "t.csv"
    path.write_bytes(end.join(rows).encode() + end.encode())
    bad = BadRows("skip")
    assert len(read_trace(path, "philly", EIGHT, bad)) == 1
    assert [(e.line, e.column) for e in bad.first] == [(3, "cluster"), (4, "num_gpus")]


# ------------------------------------------------------------------ what a value looks like (D22)
def test_a_byte_order_mark_is_not_part_of_the_header(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "philly_small.csv").read_bytes())
    assert detect_format(path) == "philly"
    assert shape_of(read_trace(path, "philly", EIGHT)) == shape_of(read_trace(FIXTURES / "philly_small.csv",
                                                                              "philly", EIGHT))


@pytest.mark.parametrize("vc, shown", [("vc\x001", r'"vc\x001"'), ("vc\x01x", r'"vc\x01x"'),
                                       ("vc\x7f", r'"vc\x7f"'), ("vc\x1cx", r'"vc\x1cx"'), ("vc\x0bx", r'"vc\x0bx"')])
def test_a_control_character_in_a_value_is_shown_escaped(tmp_path, vc, shown):
    path = tmp_path / "t.csv"
    path.write_text(f"timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,60,1,60,{vc}\n")
    with pytest.raises(BadRow) as caught:
        read_trace(path, "philly", EIGHT)
    assert str(caught.value).endswith(f"got {shown}")


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


# ------------------------------------------------------------------ openb: node names, empty asks, the multigpu lists
OPENB = FIXTURES / "openb"
MULTIGPU = OPENB / "pods_multigpu.csv"      # the five columns of the FGD artifact's openb_pod_list_multigpu*


def test_a_duplicate_openb_node_is_called_a_node_name(tmp_path):
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,1024,2,T4\nn0,8000,1024,2,T4\n")
    with pytest.raises(ConfigError, match=r"nodes.csv: line 3: sn: expected a node name not used before "
                                          r"\(line 2 has it\), got \"n0\"$"):
        read_openb_nodes(path)


@pytest.mark.parametrize("row, expected", [
    ("p,0,0,0,0,,0,10", r"line 2: cpu_milli: expected cpu_milli, memory_mib or num_gpu > 0 \(a pod that asks for "
                        r"nothing\)"),
    ("p,1000,0,1,1000,V100||T4,0,10", r"line 2: gpu_spec: expected names separated by '\|' \(empty: any\)"),
    ("p,1000,0,1,1000,|,0,10", r"line 2: gpu_spec: expected names separated by '\|'"),
])
def test_openb_pods_that_ask_for_nothing_or_name_an_empty_model_are_bad_rows(tmp_path, row, expected):
    path = tmp_path / "pods.csv"
    path.write_text(f"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n{row}\n")
    with pytest.raises(BadRow, match=expected):
        read_openb_pods(path)


def test_a_pod_list_without_times_is_read_for_fill_mode():
    pods = read_openb_pods(MULTIGPU, need_times=False)
    assert [(pod.name, pod.gpu_milli, pod.role.gpus, pod.role.vcores, pod.creation_s) for pod in pods.pods] == [
        ("syn-mpod-0", 1000, 1, 12.0, None), ("syn-mpod-1", 460, 0, 6.0, None), ("syn-mpod-2", 2000, 2, 8.0, None),
        ("syn-mpod-3", 0, 0, 4.0, None), ("syn-mpod-4", 4000, 4, 16.0, None), ("syn-mpod-5", 250, 0, 2.0, None)]
    assert detect_format(MULTIGPU) == "openb"


def test_time_mode_refuses_a_pod_list_without_times_at_its_header():
    for read in (lambda: read_openb_pods(MULTIGPU), lambda: read_trace(MULTIGPU, "openb", None)):
        with pytest.raises(ConfigError, match=r"pods_multigpu.csv: line 1: expected a header with the columns "
                                              r".*\(missing: creation_time,deletion_time\); --mode time submits each "
                                              r"pod at its creation_time .*with --mode fill"):
            read()


@pytest.mark.parametrize("need_times", [True, False])
def test_a_pod_list_without_a_resource_column_is_refused_without_a_word_on_times(tmp_path, need_times):
    path = tmp_path / "pods.csv"
    path.write_text("name,cpu_milli,memory_mib,gpu_milli,creation_time,deletion_time\np,1000,1024,0,0,10\n")
    with pytest.raises(ConfigError, match=r"line 1: expected a header .*\(missing: num_gpu\), got") as caught:
        read_openb_pods(path, need_times=need_times)
    assert "--mode" not in str(caught.value)


def test_fill_mode_reads_the_times_it_is_given_as_before():
    with_times = read_openb_pods(OPENB / "pods_small.csv", need_times=False)
    assert with_times == read_openb_pods(OPENB / "pods_small.csv")


def test_the_replay_command_fills_with_a_pod_list_without_times_and_time_mode_refuses_it(capsys):
    from gangmaster.tools.cli import main
    nodes = OPENB / "openb_node_list_gpu_node.csv"
    assert main(["replay", str(MULTIGPU), "--format", "openb", "--mode", "fill", "--nodes-file", str(nodes),
                 "--seed", "1", "--json"]) == 0
    assert '"pods_by_seed"' in capsys.readouterr().out
    assert main(["replay", str(MULTIGPU), "--format", "openb", "--nodes-file", str(nodes)]) == 2
    assert "(missing: creation_time,deletion_time); --mode time" in capsys.readouterr().err
