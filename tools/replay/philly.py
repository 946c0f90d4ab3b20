"""Philly's flattened CSV (the Pollux artifact's copy of the ATC'19 trace).

Columns ``timestamp`` (submit, ``YYYY-MM-DD HH:MM:SS``), ``duration`` (s), ``num_gpus``
(the gang size), ``gpu_time`` (must equal duration × num_gpus: a row where it does not
is bad, as the columns then disagree on what ran), ``cluster`` (the VC, read as the
queue). A job of g GPUs is one gang: one instance of g GPUs when g fits a node of the
cluster, else ⌊g/G⌋ instances of G plus one of the remainder. Jobs carry no id: a job
is named by its line in the file (``L0000002`` is the first data row).
"""
from __future__ import annotations

import math
from pathlib import Path

from gangmaster.conf.limits import MAX_INSTANCES_PER_JOB

from .trace import JobTable, NodeShape
from .trace_csv import BadRow, BadRows, Kept, Submitted, Window, csv_rows, job_table, read_trace_text

COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
#: Relative difference tolerated between gpu_time and duration × num_gpus (float printing).
GPU_TIME_TOLERANCE = 1e-9


def read_philly(path: str | Path, shape: NodeShape, bad_rows: BadRows | None = None,
                window: Window | None = None) -> JobTable:
    bad_rows = bad_rows or BadRows()
    trace = read_trace_text(path)
    max_gpus = MAX_INSTANCES_PER_JOB * shape.gpus
    jobs = Kept(trace.source, window)
    for row in csv_rows(trace, bad_rows, COLUMNS):
        try:
            submit = row.timestamp("timestamp")
            duration = row.seconds("duration", positive=True)
            gpus = row.integer("num_gpus", minimum=1, maximum=max_gpus,
                               limit=f"MAX_INSTANCES_PER_JOB instances of {shape.gpus} GPUs")
            gpu_time = row.number("gpu_time")
            if not math.isclose(gpu_time, duration * gpus, rel_tol=GPU_TIME_TOLERANCE):
                raise row.error("gpu_time", f"duration × num_gpus = {duration * gpus:g}", row.values["gpu_time"])
            queue = row.name("cluster")
        except BadRow as error:
            bad_rows.add(error)
            continue
        jobs.add(Submitted(submit, f"L{row.line:07d}", duration, queue, shape.gang_roles(gpus)), f"line {row.line}")
    return job_table(jobs, trace, "philly")
