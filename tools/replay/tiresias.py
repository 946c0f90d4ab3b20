"""The Tiresias simulator's job CSV (its cluster spec is read by
:func:`~.clusters.from_tiresias_spec`).

Columns ``job_id, num_gpu, submit_time`` (s), ``iterations, model_name, duration`` (s),
``interval``; only the id, GPUs, submit and duration matter to a replay. Every job goes
to the queue ``default``. A job of more GPUs than a node has spans nodes by the same
rule as Philly's (⌊g/G⌋ instances of G plus one of the remainder).
"""
from __future__ import annotations

from pathlib import Path

from gangmaster.conf.limits import MAX_INSTANCES_PER_JOB

from .trace import JobTable, NodeShape
from .trace_csv import BadRow, BadRows, Kept, Submitted, Window, csv_rows, duplicate, job_table, read_trace_text

COLUMNS = ("job_id", "num_gpu", "submit_time", "duration")
OPTIONAL_COLUMNS = ("iterations", "model_name", "interval")
QUEUE = "default"


def read_tiresias(path: str | Path, shape: NodeShape, bad_rows: BadRows | None = None,
                  window: Window | None = None) -> JobTable:
    bad_rows = bad_rows or BadRows()
    trace = read_trace_text(path)
    seen: dict[str, int] = {}
    jobs = Kept(trace.source, window)
    for row in csv_rows(trace, bad_rows, COLUMNS, OPTIONAL_COLUMNS):
        try:
            job_id = row.name("job_id")
            gpus = row.integer("num_gpu", minimum=1, maximum=MAX_INSTANCES_PER_JOB * shape.gpus,
                               limit=f"MAX_INSTANCES_PER_JOB instances of {shape.gpus} GPUs")
            submit = row.seconds("submit_time")
            duration = row.seconds("duration", positive=True)
            again = duplicate(row, "job_id", job_id, seen)
            if again:
                raise again
        except BadRow as error:
            bad_rows.add(error)
            continue
        jobs.add(Submitted(submit, job_id, duration, QUEUE, shape.gang_roles(gpus)), f"line {row.line}")
    return job_table(jobs, trace, "tiresias")
