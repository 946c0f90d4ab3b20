"""One entry to the trace readers: ``read_trace(path, format, shape, ...)``, and which
format a file is when ``--format`` is not given. (An openb pod list read this way is its
``--mode time`` table; fill mode builds one table per seed: :func:`.openb.fill_plan`.)"""
from __future__ import annotations

import csv
from pathlib import Path

from gangmaster.conf.fields import ConfigError

from .native import COLUMNS as NATIVE_COLUMNS
from .native import read_native
from .openb import POD_COLUMNS as OPENB_COLUMNS
from .openb import read_openb
from .philly import COLUMNS as PHILLY_COLUMNS
from .philly import read_philly
from .tiresias import COLUMNS as TIRESIAS_COLUMNS
from .tiresias import read_tiresias
from .trace import JobTable, NodeShape
from .trace_csv import BadRows, Window, read_trace_text

READERS = {"philly": read_philly, "tiresias": read_tiresias, "native": read_native, "openb": read_openb}
FORMATS = tuple(READERS)
#: Formats whose submit times are dates (their --window is given as dates).
DATED_FORMATS = ("philly",)


def read_trace(path: str | Path, format: str, shape: NodeShape, bad_rows: BadRows | None = None,
               window: Window | None = None) -> JobTable:
    if format not in READERS:
        raise ConfigError("--format", "", f"one of {', '.join(FORMATS)}", format)
    return READERS[format](path, shape, bad_rows or BadRows(), window)


def detect_format(path: str | Path) -> str:
    """``native`` for a .yaml/.yml file; for CSV, the format whose required columns the
    header has. Reading the header reads the file (within its limit) once more."""
    if Path(path).suffix.lower() in (".yaml", ".yml"):
        return "native"
    trace = read_trace_text(path)
    header = next(csv.reader(trace.text.splitlines()[:1]), [])
    columns = {name.strip() for name in header}
    for format, required in (("philly", PHILLY_COLUMNS), ("tiresias", TIRESIAS_COLUMNS),
                             ("native", NATIVE_COLUMNS), ("openb", OPENB_COLUMNS)):
        if set(required) <= columns:
            return format
    raise ConfigError(str(path), "line 1", "the header of a Philly, Tiresias, native or openb trace (or say which "
                                           "with --format)", ",".join(header))
