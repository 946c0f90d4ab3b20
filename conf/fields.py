"""Reading YAML configuration with errors that say which file, which field, and what
was expected.

Every YAML reader in gangmaster (defaults and ``--config`` files, cluster, queue and
scenario files, job specs, topology presets) goes through :func:`load_yaml` and
:class:`Fields`, so an error always reads like::

    conf/clusters/lab.yaml: nodeGroups[1].gpus: expected an integer >= 0, got "eight"

:func:`load_yaml` reads through :func:`read_limited` (regular files only, at most
``MAX_YAML_FILE_BYTES``) and :func:`decode_utf8`, and parses with the one strict loader
of :mod:`gangmaster.conf.yaml_loader`; the ``topo -m`` text and RM state readers use
the first two as well. Nothing a file holds escapes as anything but a ConfigError.
"""
from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

import yaml

from . import yaml_loader
from .limits import MAX_NAME_CHARS, MAX_YAML_FILE_BYTES

_MISSING = object()
T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value that is missing, mistyped or out of range."""

    def __init__(self, source: str, field: str, expected: str, got: Any = _MISSING):
        self.source, self.field, self.expected = source, field, expected
        where = f"{source}: {field}" if field else source
        text = f"{where}: expected {expected}"
        if got is not _MISSING:
            text += f", got {_show(got)}"
        super().__init__(text)


_NAME = re.compile(r"[^\s\x00-\x1f\x7f]{1,%d}" % MAX_NAME_CHARS)
_NAME_EXPECTED = f"a name of 1..{MAX_NAME_CHARS} characters (MAX_NAME_CHARS) without spaces or control characters"


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def is_name(value: Any) -> bool:
    """Whether ``value`` is a name (:meth:`Fields.name`'s rule), for readers of other formats
    (the cluster snapshots' JSON) that check names without a :class:`Fields`."""
    return _is_name(value)


def _show(value: Any) -> str:
    """A found value for a message, clipped (a 4 MB string must not become a 4 MB message),
    a character that does not print written as an escape (``\\x00``, ``\\t``): a NUL or a
    control character shown as itself is invisible and the value looks valid."""
    if isinstance(value, str):
        return f'"{_escaped(value)}"' if len(value) <= 80 else \
            f'"{_escaped(value[:60])}..." ({len(value):,} characters)'
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value) if not isinstance(value, int) or abs(value) < 10 ** 30 else "a huge integer"
    return text if len(text) <= 80 else text[:60] + "..."


def _escaped(text: str) -> str:
    """``text`` with each character that does not print (but a space) as Python writes it
    in a string literal: ``\\x00``, ``\\n``, ``\\u200b``."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def read_limited(path: str | Path, limit: int, limit_name: str) -> bytes:
    """The bytes of the regular file at ``path``, refused past ``limit`` bytes.

    Reads at most ``limit + 1`` bytes, and refuses anything but a regular file before
    reading: ``/dev/zero`` never ends and opening a FIFO would block forever (the
    file is opened non-blocking, then checked). ``limit_name`` is the constant in
    ``conf/limits.py`` the message names."""
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError(source, "", "an existing file") from None
    except OSError as exc:
        raise ConfigError(source, "", f"a readable file ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ConfigError(source, "", f"a regular file, not {_file_kind(mode)}")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise ConfigError(source, "", f"a readable file ({exc.strerror})") from None
    if len(data) > limit:
        raise ConfigError(source, "", f"a file of at most {limit:,} bytes ({limit_name} in "
                                      "conf/limits.py)")
    return data


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


class NotUTF8(ConfigError):
    """Bytes that are not UTF-8 text; ``line`` is the line of the first bad byte."""

    def __init__(self, source: str, data: bytes, error: UnicodeDecodeError):
        self.line = data.count(b"\n", 0, error.start) + 1
        super().__init__(source, f"line {self.line}", f"UTF-8 text (byte {data[error.start]:#04x} "
                                                      f"at offset {error.start} is not)")


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` as text; a byte that is not UTF-8 is named with its line and offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUTF8(source, data, exc) from None


def load_yaml(path: str | Path) -> Any:
    """Read and parse a YAML file (see :func:`parse_yaml`); a missing, unreadable, special,
    oversized or non-UTF-8 file names the file (and the line)."""
    data = read_limited(path, MAX_YAML_FILE_BYTES, "MAX_YAML_FILE_BYTES")
    return parse_yaml(decode_utf8(data, str(path)), str(path))


def parse_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load`` with gangmaster's refusals (:mod:`gangmaster.conf.yaml_loader`:
    duplicate keys, nesting, aliases); every problem is a ConfigError naming the line."""
    if len(text) > MAX_YAML_FILE_BYTES:
        raise ConfigError(source, "", f"a text of at most {MAX_YAML_FILE_BYTES:,} characters "
                                      "(MAX_YAML_FILE_BYTES in conf/limits.py)")
    try:
        return yaml_loader.load(text)
    except yaml_loader.YAMLRefused as exc:
        raise ConfigError(source, _line(exc.problem_mark, text), exc.expected) from None
    except yaml.reader.ReaderError as exc:     # a character YAML does not allow (a NUL, ...)
        line = text.count("\n", 0, exc.position) + 1
        code = ord(exc.character) if isinstance(exc.character, str) else exc.character
        raise ConfigError(source, f"line {line}", f"valid YAML (no control characters; found "
                                                  f"#x{code:04x})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, _line(getattr(exc, "problem_mark", None), text),
                          f"valid YAML ({_yaml_problem(exc, text)})") from None
    except UnicodeEncodeError:      # a str holding lone surrogates (never from a file we decoded)
        raise ConfigError(source, "", "text of Unicode characters (found a lone surrogate)") from None


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """A PyYAML error's problem, after its context when it has one ("found duplicate
    anchor 'x'; first occurrence on line 1, second occurrence")."""
    problem = getattr(exc, "problem", None) or str(exc)
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context:
        where = f" on {_line(context_mark, text)}" if context_mark is not None else ""
        problem = f"{context}{where}, {problem}"
    return problem


def _line(mark: Any, text: str) -> str:
    """"line N" of a YAML mark; libyaml puts an error at the end of a text that lacks
    its final newline on the line after it, which the file does not have."""
    if mark is None:
        return ""
    lines = text.count("\n") + 1
    return f"line {min(mark.line + 1, lines)}"


class Fields:
    """A mapping read from YAML, with its source file and the path to it.

    Accessors check the type and range and raise :class:`ConfigError` naming the
    full field path (``taskRoles.worker.instances``)."""

    def __init__(self, data: Any, source: str, path: str = ""):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(source, path or "(top level)", "a mapping", data)
        self.data, self.source, self.path = data, source, path

    def field(self, key: str) -> str:
        name = str(key) if str(key) else '""'        # an empty key must still show
        return f"{self.path}.{name}" if self.path else name

    def error(self, key: str, expected: str, got: Any = _MISSING) -> ConfigError:
        return ConfigError(self.source, self.field(key), expected, got)

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def keys(self) -> Iterable[str]:
        return self.data.keys()

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        if key not in self.data or self.data[key] is None:
            if default is _MISSING:
                raise self.error(key, "a value (the field is required)")
            return default
        return self.data[key]

    def integer(self, key: str, default: Any = _MISSING, minimum: int | None = None,
                maximum: int | None = None, limit: str | None = None) -> int:
        """An integer within the bounds. ``limit`` names the constant in conf/limits.py
        that ``maximum`` is: going past it is then reported as that documented limit."""
        value = self.raw(key, default)
        bounds = _bounds(minimum, None if limit else maximum)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"an integer{bounds}", value)
        if minimum is not None and value < minimum:
            raise self.error(key, f"an integer{bounds}", value)
        if maximum is not None and value > maximum:
            raise self.error(key, _past_limit("an integer", maximum, limit) if limit
                             else f"an integer{bounds}", value)
        return value

    def number(self, key: str, default: Any = _MISSING, minimum: float | None = None,
               maximum: float | None = None, exclusive_minimum: bool = False,
               limit: str | None = None) -> float:
        """A finite number (NaN and infinities are refused) within the bounds; ``limit``
        as for :meth:`integer`."""
        value = self.raw(key, default)
        top = None if limit else maximum
        bound = (f" > {minimum:g}" + (f" and <= {top:g}" if top is not None else "")
                 if exclusive_minimum else _bounds(minimum, top))
        if isinstance(value, str) and _exponent_without_point(value):
            raise self.error(key, f"a number{bound} (YAML reads {value} as text: write the "
                                  "mantissa with a point, as in 1.0e-3)", value)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self.error(key, f"a number{bound}", value)
        if not _finite(value):
            raise self.error(key, f"a finite number{bound}", value)
        if minimum is not None and (value <= minimum if exclusive_minimum else value < minimum):
            raise self.error(key, f"a number{bound}", value)
        if maximum is not None and value > maximum:
            raise self.error(key, _past_limit("a number", maximum, limit) if limit
                             else f"a number{bound}", value)
        return float(value)

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, "true or false", value)
        return value

    def string(self, key: str, default: Any = _MISSING, choices: Iterable[str] | None = None) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str) or not value:
            raise self.error(key, "a non-empty string", value)
        if choices is not None:
            choices = list(choices)
            if value not in choices:
                raise self.error(key, "one of " + ", ".join(choices), value)
        return value

    def strings(self, key: str, default: Any = _MISSING) -> list[str]:
        """A list of strings; a single string is taken as a list of one."""
        value = self.raw(key, default)
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(key, "a list of strings", value)
        return list(value)

    def name(self, key: str, default: Any = _MISSING) -> str:
        """A name the RM will take (a host, rack, label, GPU type, queue): 1..MAX_NAME_CHARS
        characters, none of them white space or control characters."""
        value = self.raw(key, default)
        if not _is_name(value):
            raise self.error(key, _NAME_EXPECTED, value)
        return value

    def names(self, key: str, default: Any = _MISSING) -> list[str]:
        """A list of :meth:`name` values; a single name is taken as a list of one."""
        value = self.raw(key, default)
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(_is_name(v) for v in values):
            raise self.error(key, f"a list of names ({_NAME_EXPECTED})", value)
        return list(values)

    def mapping(self, key: str, default: Any = _MISSING) -> "Fields":
        value = self.raw(key, {} if default is _MISSING else default)
        if not isinstance(value, dict):
            raise self.error(key, "a mapping", value)
        return Fields(value, self.source, self.field(key))

    def items(self, key: str) -> Iterator[tuple[str, "Fields"]]:
        """The entries of a mapping of mappings (``taskRoles.<name>``)."""
        parent = self.mapping(key)
        for name, value in parent.data.items():
            yield str(name), Fields(value, self.source, parent.field(str(name)))

    def list_of_mappings(self, key: str, default: Any = _MISSING) -> list["Fields"]:
        value = self.raw(key, default)
        if not isinstance(value, list):
            raise self.error(key, "a list", value)
        return [Fields(item, self.source, f"{self.field(key)}[{i}]") for i, item in enumerate(value)]

    def reject_unknown(self, known: Iterable[str]) -> None:
        for error in self.unknown_fields(known):
            raise error

    def unknown_fields(self, known: Iterable[str]) -> list[ConfigError]:
        """One error per key not in ``known`` (for readers that report every problem)."""
        known = set(known)
        return [ConfigError(self.source, self.field(str(key)),
                            "no such field here; known fields: " + ", ".join(sorted(known)))
                for key in self.data if key not in known]


#: ``1e-3``: a float to Python and JSON, but text to YAML 1.1 (PyYAML) without a point.
_EXPONENT_WITHOUT_POINT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")


def _exponent_without_point(text: str) -> bool:
    return _EXPONENT_WITHOUT_POINT.fullmatch(text.strip()) is not None


def _past_limit(kind: str, maximum: float, limit: str) -> str:
    return f"{kind} <= {maximum:,} ({limit} in conf/limits.py)"


def _finite(value: int | float) -> bool:
    """NaN and infinities are not numbers of anything; nor is an int no float can hold."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _bounds(minimum: Any, maximum: Any) -> str:
    if minimum is not None and maximum is not None:
        return f" within {minimum}..{maximum}"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


class ConfigErrors(ConfigError):
    """Several configuration errors found in one pass, reported together.

    A ``ConfigError`` itself (the CLI prints it and exits 2); ``errors`` holds each
    one, and the message is one line per error under a header naming the file."""

    def __init__(self, source: str, errors: list[ConfigError], what: str = "configuration"):
        self.source, self.errors = source, list(errors)
        self.field, self.expected = "", what
        count = f"{len(self.errors)} error{'s' if len(self.errors) != 1 else ''}"
        ValueError.__init__(self, f"{source}: {count} in the {what}:\n"
                            + "\n".join(f"  {e}" for e in self.errors))

    @property
    def messages(self) -> list[str]:
        return [str(e) for e in self.errors]


class ErrorCollector:
    """Collects configuration errors so a reader can report every problem at once.

    ``value = errors.read(lambda: f.integer("cpu", minimum=0), fallback=0)`` returns
    the value, or records the error and returns ``fallback`` so reading goes on."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def read(self, reader: Callable[[], T], fallback: Any = None) -> T:
        try:
            return reader()
        except ConfigError as exc:
            self.errors.extend(exc.errors if isinstance(exc, ConfigErrors) else [exc])
            return fallback

    def add(self, *errors: ConfigError) -> None:
        self.errors.extend(errors)

    def __bool__(self) -> bool:
        return bool(self.errors)

    def raise_if_any(self, source: str, error_class: type[ConfigErrors] = ConfigErrors) -> None:
        if self.errors:
            raise error_class(source, self.errors)
