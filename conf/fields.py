"""Reading YAML configuration with errors that say which file, which field, and what
was expected.

Every YAML reader in gangmaster (defaults, cluster files, job specs, topology
presets, RM scenarios) goes through :func:`load_yaml` and :class:`Fields`, so an
error always reads like::

    conf/clusters/lab.yaml: nodeGroups[1].gpus: expected an integer >= 0, got "eight"
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

import yaml

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


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def load_yaml(path: str | Path) -> Any:
    """``yaml.safe_load`` a file; a missing file or a syntax error names the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "", "an existing file") from None
    except OSError as exc:
        raise ConfigError(str(path), "", f"a readable file ({exc.strerror})") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, line, f"valid YAML ({problem})") from None


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
        return f"{self.path}.{key}" if self.path else str(key)

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
                maximum: int | None = None) -> int:
        value = self.raw(key, default)
        bounds = _bounds(minimum, maximum)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"an integer{bounds}", value)
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise self.error(key, f"an integer{bounds}", value)
        return value

    def number(self, key: str, default: Any = _MISSING, minimum: float | None = None,
               maximum: float | None = None, exclusive_minimum: bool = False) -> float:
        value = self.raw(key, default)
        bound = (f" > {minimum:g}" if exclusive_minimum else _bounds(minimum, maximum))
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self.error(key, f"a number{bound}", value)
        low_bad = minimum is not None and (value <= minimum if exclusive_minimum else value < minimum)
        if low_bad or (maximum is not None and value > maximum):
            raise self.error(key, f"a number{bound}", value)
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
