"""What every trace reader shares: reading a trace file within the limits, CSV rows with
their line numbers, typed fields whose errors name the file, line and field, the
``--on-bad-row stop|skip`` policy, and the submit window (applied while reading:
:class:`Kept` holds only the jobs inside it, so a window of a trace larger than
MAX_TRACE_JOBS replays).

A bad row raises :class:`BadRow` (a :class:`~gangmaster.conf.fields.ConfigError`, so
the command exits 2 with ``philly.csv: line 17: num_gpus: expected an integer >= 1,
got "x"``). Under ``skip`` the reader hands it to :class:`BadRows` instead and goes on;
the command prints how many were skipped and the first few.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterator

from gangmaster.conf.fields import ConfigError, decode_utf8, read_limited
from gangmaster.conf.limits import (MAX_DURATION_S, MAX_NAME_CHARS, MAX_TRACE_FIELD_CHARS, MAX_TRACE_FILE_BYTES,
                                    MAX_TRACE_JOBS)

from .trace import JobTable, TraceJob, TraceRole, sha256_of, sorted_jobs

ON_BAD_ROW = ("stop", "skip")
#: Skipped rows kept to show; the rest are only counted.
SHOWN_BAD_ROWS = 5
_NAME = re.compile(r"[^\s\x00-\x1f\x7f]{1,%d}" % MAX_NAME_CHARS)
_NAME_EXPECTED = f"1..{MAX_NAME_CHARS} characters (MAX_NAME_CHARS) without spaces or control characters"
#: One field of a CSV record as the csv module reads it (default dialect): quoted, with
#: "" for a quote and anything after the closing quote up to the comma, or plain.
_FIELD = re.compile(r'"[^"]*(?:""[^"]*)*"?[^,]*|[^,]*')
#: What a UTF-8 file may start with (Excel writes it): not part of the header.
BOM = "\ufeff"
TIMESTAMP_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d")


class BadRow(ConfigError):
    """A trace row that cannot be read: ``source: line N: field: expected ..., got ...``."""

    def __init__(self, source: str, line: int, column: str, expected: str, got=None):
        self.line, self.column = line, column
        where = f"line {line}: {column}" if column else f"line {line}"
        if got is None:
            super().__init__(source, where, expected)
        else:
            super().__init__(source, where, expected, got)


@dataclass
class BadRows:
    """The ``--on-bad-row`` policy and what it skipped: ``stop`` raises the first bad
    row, ``skip`` counts them all and keeps the first :data:`SHOWN_BAD_ROWS`."""

    policy: str = "stop"
    count: int = 0
    first: list[ConfigError] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.policy not in ON_BAD_ROW:
            raise ValueError(f"on_bad_row: expected one of {ON_BAD_ROW}, got {self.policy!r}")

    def add(self, error: ConfigError) -> None:
        """A bad row (a :class:`BadRow`, or a YAML job's ConfigError): raised under ``stop``."""
        if self.policy == "stop":
            raise error
        self.count += 1
        if len(self.first) < SHOWN_BAD_ROWS:
            self.first.append(error)

    def summary(self) -> str:
        """``skipped 3 bad rows; first: ...`` (empty when none were skipped)."""
        if not self.count:
            return ""
        rows = "s" if self.count != 1 else ""
        shown = "\n  ".join(str(error) for error in self.first)
        more = f"\n  ... and {self.count - len(self.first):,} more" if self.count > len(self.first) else ""
        return f"skipped {self.count:,} bad row{rows}; first:\n  {shown}{more}"


@dataclass(frozen=True)
class TraceText:
    source: str
    text: str
    sha256: str


def read_trace_text(path: str | Path) -> TraceText:
    """A trace file's text and digest: regular files only, at most MAX_TRACE_FILE_BYTES, UTF-8
    (a byte order mark at the start, as Excel writes one, is not part of the text)."""
    data = read_limited(path, MAX_TRACE_FILE_BYTES, "MAX_TRACE_FILE_BYTES")
    text = decode_utf8(data, str(path))
    return TraceText(str(path), text[len(BOM):] if text.startswith(BOM) else text, sha256_of(data))


class Row:
    """One CSV data row: its line number and typed accessors whose errors name the
    file, line and column."""

    def __init__(self, source: str, line: int, values: dict[str, str]):
        self.source, self.line, self.values = source, line, values

    def error(self, column: str, expected: str, got=None) -> BadRow:
        return BadRow(self.source, self.line, column, expected, got)

    def has(self, column: str) -> bool:
        return bool(self.values.get(column, "").strip())

    def text(self, column: str) -> str:
        value = self.values.get(column, "").strip()
        if not value:
            raise self.error(column, "a value (the column is required)")
        return value

    def name(self, column: str, default: str | None = None) -> str:
        if default is not None and not self.has(column):
            return default
        value = self.text(column)
        if not _NAME.fullmatch(value):
            raise self.error(column, f"a name of {_NAME_EXPECTED}", value)
        return value

    def names(self, column: str, separator: str) -> tuple[str, ...]:
        """Names separated by ``separator`` (GPU types), each once; empty: none. An empty
        name (``V100;;T4``, ``;``) is refused, not read as "any"."""
        text = self.values.get(column, "").strip()
        if not text:
            return ()
        names = tuple(dict.fromkeys(part.strip() for part in text.split(separator)))
        if not all(_NAME.fullmatch(name) for name in names):
            raise self.error(column, f"names separated by '{separator}' (empty: any), each of {_NAME_EXPECTED}",
                             text)
        return names

    def number(self, column: str, minimum: float = 0.0, positive: bool = False,
               maximum: float = math.inf, limit: str = "", default: float | None = None) -> float:
        if default is not None and not self.has(column):
            return default
        text = self.text(column)
        bound = f"> {minimum:g}" if positive else f">= {minimum:g}"
        if math.isfinite(maximum):
            bound += f" and <= {maximum:,.0f}" + (f" ({limit})" if limit else "")
        try:
            value = float(text)
        except ValueError:
            raise self.error(column, f"a number {bound}", text) from None
        if not math.isfinite(value) or value < minimum or (positive and value == minimum) or value > maximum:
            raise self.error(column, f"a finite number {bound}", text)
        return value

    def seconds(self, column: str, positive: bool = False) -> float:
        return self.number(column, positive=positive, maximum=MAX_DURATION_S, limit="MAX_DURATION_S")

    def integer(self, column: str, minimum: int = 0, maximum: int | None = None, limit: str = "",
                default: int | None = None) -> int:
        if default is not None and not self.has(column):
            return default
        text = self.text(column)
        bound = f">= {minimum}" + (f" and <= {maximum:,}" if maximum is not None else "") + \
            (f" ({limit})" if limit else "")
        try:
            value = int(text)
        except ValueError:
            try:   # "8.0" is an integer written as a float, as pandas writes one
                number = float(text)
            except ValueError:
                raise self.error(column, f"an integer {bound}", text) from None
            if not number.is_integer():
                raise self.error(column, f"an integer {bound}", text) from None
            value = int(number)
        if value < minimum or (maximum is not None and value > maximum):
            raise self.error(column, f"an integer {bound}", text)
        return value

    def timestamp(self, column: str) -> datetime:
        text = self.text(column)
        parsed = parse_timestamp(text)
        if parsed is None:
            raise self.error(column, "a time like 2017-10-01 00:00:00", text)
        return parsed


def parse_timestamp(text: str) -> datetime | None:
    text = text.strip()
    if len(text) == 19 and text[10] == " ":     # the usual layout, ten times faster than strptime
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            return None
    for layout in TIMESTAMP_FORMATS:
        try:
            return datetime.strptime(text, layout)
        except ValueError:
            continue
    return None


def csv_rows(trace: TraceText, bad_rows: BadRows, required: tuple[str, ...],
             optional: tuple[str, ...] = (), why: dict[str, str] | None = None) -> Iterator[Row]:
    """The data rows of a CSV trace with a header line; blank lines are skipped (Philly's
    file ends with one). A header without a required column (``why`` says why a column
    is needed, when that is not plain), or an unknown column, is an error of the whole
    file, whatever ``--on-bad-row`` says; a row with the wrong number of fields or a
    field past MAX_TRACE_FIELD_CHARS goes to ``bad_rows``. Lines are those of the file
    (``\n``, ``\r\n`` or ``\r``), as an editor counts them."""
    lines = _Lines(trace.text)
    reader = csv.reader(lines)
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise ConfigError(trace.source, "line 1", f"a header line naming the columns {','.join(required)}") from None
    except csv.Error as error:
        raise _field_past_limit(trace.source, trace.text[:lines.end], reader.line_num, [], error) from None
    missing = [name for name in required if name not in header]
    if missing:
        said = dict.fromkeys((why or {}).get(name) for name in missing)
        reasons = "".join(f"; {reason}" for reason in said if reason)
        raise ConfigError(trace.source, "line 1", f"a header with the columns {','.join(required)} "
                                                  f"(missing: {','.join(missing)}){reasons}", ",".join(header))
    unknown = [name for name in header if name not in required and name not in optional]
    if unknown:
        known = ",".join(required + optional)
        raise ConfigError(trace.source, "line 1", f"only the columns {known} (unknown: {','.join(unknown)})",
                          ",".join(header))
    while True:
        start = lines.end
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as error:   # a field past the csv module's own limit: find which, and go on after it
            bad_rows.add(_field_past_limit(trace.source, trace.text[start:lines.end], reader.line_num, header, error))
            continue
        line = reader.line_num
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != len(header):
            bad_rows.add(BadRow(trace.source, line, "", f"{len(header)} comma-separated fields like the header",
                                f"{len(values)} fields"))
            continue
        if max(map(len, values)) > MAX_TRACE_FIELD_CHARS:
            too_long = next(i for i, value in enumerate(values) if len(value) > MAX_TRACE_FIELD_CHARS)
            bad_rows.add(BadRow(trace.source, line, header[too_long], _FIELD_EXPECTED, values[too_long]))
            continue
        yield Row(trace.source, line, dict(zip(header, values)))


_FIELD_EXPECTED = f"a field of at most {MAX_TRACE_FIELD_CHARS:,} characters (MAX_TRACE_FIELD_CHARS)"


class _Lines:
    """The lines of a text for csv.reader (with their ends, split at ``\\n``, ``\\r\\n`` or
    ``\\r`` as the csv module expects), one at a time, and where the last one read ends:
    the text of a record the csv module refuses is found again from there."""

    _LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")

    def __init__(self, text: str):
        self._lines = self._LINE.finditer(text)
        self.end = 0

    def __iter__(self) -> "_Lines":
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.end = line.end()
        return line.group()


def _field_past_limit(source: str, record: str, line: int, header: list[str], error: csv.Error) -> BadRow:
    """The error of a record (ending on ``line``) the csv module stopped reading: at a field
    longer than its limit, so this names the first field past MAX_TRACE_FIELD_CHARS and
    its column (the csv module says neither)."""
    record = record.rstrip("\r\n")
    position = column = 0
    while position <= len(record):
        field = _FIELD.match(record, position).group()
        if len(field) > MAX_TRACE_FIELD_CHARS:
            name = header[column] if column < len(header) else f"field {column + 1}"
            quoted = len(field) > 1 and field[0] == field[-1] == '"'
            return BadRow(source, line, name, _FIELD_EXPECTED, field[1:-1].replace('""', '"') if quoted else field)
        position, column = position + len(field) + 1, column + 1
    return BadRow(source, line, "", "a CSV record", str(error))


@dataclass(frozen=True)
class Window:
    """Jobs submitted in [start, end] (inclusive), in the trace's own time: seconds for
    traces that count seconds, a date for Philly. ``None`` ends are open."""

    start: float | datetime | None = None
    end: float | datetime | None = None

    def holds(self, submit) -> bool:
        return (self.start is None or submit >= self.start) and (self.end is None or submit <= self.end)

    def __str__(self) -> str:
        show = (lambda v: "…" if v is None else (v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, datetime)
                                                 else f"{v:g} s"))
        return f"{show(self.start)} .. {show(self.end)}"


def parse_window(start: str, end: str, dated: bool) -> Window:
    """``--window START END``: dates (``2017-10-01 00:00:00``) for a dated trace, seconds otherwise."""
    def one(text: str, which: str):
        if dated:
            value = parse_timestamp(text)
            if value is None:
                raise ConfigError("--window", which, "a time like 2017-10-01 00:00:00 (this trace is dated)", text)
            return value
        try:
            value = float(text)
        except ValueError:
            raise ConfigError("--window", which, "seconds from the trace's start (a number)", text) from None
        if not math.isfinite(value):
            raise ConfigError("--window", which, "a finite number of seconds", text)
        return value
    window = Window(one(start, "START"), one(end, "END"))
    if window.end < window.start:
        raise ConfigError("--window", "END", f"a time at or after START ({start})", end)
    return window


@dataclass(frozen=True)
class Submitted:
    """A job read from a trace, its submit still in the trace's own time."""

    submit: float | datetime
    job_id: str
    duration_s: float
    queue: str
    roles: tuple[TraceRole, ...]
    priority: int = 0


class Kept:
    """The jobs read so far that are inside ``--window``, at most MAX_TRACE_JOBS: a job
    outside it is let go as soon as it is read, so a window of a large trace replays
    (and the limit counts what the replay holds, not the rows of the file)."""

    def __init__(self, source: str, window: Window | None):
        self.source, self.window = source, window or Window()
        self.jobs: list[Submitted] = []

    def holds(self, submit) -> bool:
        return self.window.holds(submit)

    def add(self, job: Submitted, where: str) -> None:
        """Keep ``job`` (read at ``where``: ``line 17``, ``jobs[3]``) when it is inside the window."""
        if not self.window.holds(job.submit):
            return
        if len(self.jobs) >= MAX_TRACE_JOBS:
            windowed = self.window != Window()
            inside, hint = ((f" submitted in --window {self.window}", "narrow --window") if windowed else
                            ("", "replay a part of the trace with --window START END"))
            raise ConfigError(self.source, where, f"at most {MAX_TRACE_JOBS:,} jobs{inside} (MAX_TRACE_JOBS in "
                                                  f"conf/limits.py); {hint}, or split the file")
        self.jobs.append(job)


def job_table(kept: Kept, trace: TraceText, format: str) -> JobTable:
    """The jobs kept, their submits made seconds from the window's start (or the first
    submit), sorted; a dated trace keeps that origin as a date."""
    window, read = kept.window, kept.jobs
    origin = window.start if window.start is not None else min((job.submit for job in read), default=None)
    dated = isinstance(origin, datetime)

    def seconds(submit) -> float:
        return (submit - origin).total_seconds() if dated else float(submit - origin)

    jobs = [TraceJob(job.job_id, seconds(job.submit), job.duration_s, job.queue, job.roles, job.priority)
            for job in read]
    return JobTable(sorted_jobs(jobs), trace.source, trace.sha256, format, origin if dated else None)


def duplicate(row: Row, column: str, name: str, seen: dict[str, int], what: str = "job id") -> BadRow | None:
    """A bad row when ``name`` (a ``what``: a job id, a node name) was already read (on
    the line ``seen`` remembers)."""
    if name in seen:
        return row.error(column, f"a {what} not used before (line {seen[name]} has it)", name)
    seen[name] = row.line
    return None
