"""Reading a snapshot's JSON defensively, every error naming the file and the JSON path.

The engines' JSON changes between versions (Slurm wraps numbers as
``{"set": true, "infinite": false, "number": N}`` after 22.05, Jersey renders a
one-element list as a bare object in old Hadoop releases, fields come and go), and a
snapshot may be cut short or hand-edited. :class:`Value` reads it tolerantly where the
engines differ (a missing or ``null`` field is "not reported") and strictly where a
value is there but wrong (a string where a number belongs, a negative memory size,
NaN): that is a :class:`SnapshotError` such as::

    nodes.json: nodes.node[3].usedResource.vCores: expected a number >= 0, got "eight"
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gangmaster.conf.json_keys import DuplicateKeys, first_duplicate
from gangmaster.conf.fields import ConfigError, Fields, decode_utf8, is_name, read_limited
from gangmaster.conf.limits import MAX_SNAPSHOT_BYTES

from ..slurm.values import unwrap_number
from .model import _MISSING, SnapshotError

#: The largest number read where no limit of conf/limits.py applies (a time, a count):
#: every integer up to it is exact as a float, and amounts derived from it stay finite.
LARGEST_NUMBER = 2 ** 53


def config_error(exc: ConfigError) -> SnapshotError:
    """The same error as a :class:`SnapshotError` (``read_limited`` and ``Fields`` raise
    ConfigError), its message unchanged."""
    error = SnapshotError(exc.source, exc.field, exc.expected)
    error.args = exc.args
    return error


def read_json(path: Path, budget: int) -> Any:
    """The parsed JSON of ``path``, a regular file of at most ``budget`` bytes (what is
    left of MAX_SNAPSHOT_BYTES for all the snapshot's files together)."""
    source = str(path)
    try:
        data = read_limited(path, budget, "MAX_SNAPSHOT_BYTES")
        text = decode_utf8(data, source)
    except ConfigError as exc:
        if "MAX_SNAPSHOT_BYTES" in exc.expected:
            raise SnapshotError(source, "", f"snapshot files of at most {MAX_SNAPSHOT_BYTES:,} bytes all "
                                            f"together (MAX_SNAPSHOT_BYTES in conf/limits.py); "
                                            f"{budget:,} bytes were left for this one") from None
        raise config_error(exc) from None
    duplicated = DuplicateKeys()
    try:
        raw = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=duplicated.object)
    except json.JSONDecodeError as exc:
        raise SnapshotError(source, f"line {exc.lineno}", f"JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise SnapshotError(source, "", "JSON nested less deeply (it nests lists or objects past "
                                        "what the parser can follow)") from None
    except ValueError as exc:       # an integer of more digits than Python converts, NaN, ...
        raise SnapshotError(source, "", f"JSON with finite numbers of sensible size ({str(exc).split(';')[0]})") from None
    if duplicated.seen:
        path, key = _first_duplicate(Value(raw, source))
        raise SnapshotError(source, path, f'each key once in an object; "{key}" is given twice')
    return raw


def _first_duplicate(value: Value) -> tuple[str, str]:
    """The JSON path of the first object (depth first) with a key given twice, and the key."""
    keys, key = first_duplicate(value.raw)
    for step in keys:
        value = Value(value.raw[step], value.source, parent=value, key=step)
    return value.field(key), key


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number any engine reports")


class Value:
    """One JSON value of a snapshot file and its path in the document, for errors.

    The path is worked out only when an error names it (a story-3-sized snapshot reads
    about a hundred thousand values, and nearly none of them is ever wrong)."""

    __slots__ = ("raw", "source", "_parent", "_key")

    def __init__(self, raw: Any, source: str, path: str = "", parent: "Value | None" = None,
                 key: str | int | None = None):
        self.raw, self.source = raw, source
        self._parent, self._key = parent, (path if parent is None else key)

    @property
    def path(self) -> str:
        return self._key if self._parent is None else self._parent.field(self._key)

    # ------------------------------------------------------------------ errors
    def field(self, key: str | int | None = None) -> str:
        path = self.path
        if key is None:
            return path or "(top level)"
        if isinstance(key, int):
            return f"{path}[{key}]"
        return f"{path}.{key}" if path else key

    def error(self, expected: str, got: Any = _MISSING, key: str | int | None = None) -> SnapshotError:
        return SnapshotError(self.source, self.field(key), expected, got)

    # ------------------------------------------------------------------ structure
    def is_object(self) -> bool:
        return isinstance(self.raw, dict)

    def keys(self) -> set[str]:
        return set(self.raw) if isinstance(self.raw, dict) else set()

    def _object(self) -> dict:
        if not isinstance(self.raw, dict):
            raise self.error("a JSON object", self.raw)
        return self.raw

    def get(self, key: str) -> "Value | None":
        """The field ``key`` of this object; ``None`` when it is missing or ``null``."""
        raw = self._object().get(key)
        return None if raw is None else Value(raw, self.source, parent=self, key=key)

    def need(self, key: str) -> "Value":
        found = self.get(key)
        if found is None:
            raise self.error("a value (the field is required)", key=key)
        return found

    def has(self, key: str) -> bool:
        return isinstance(self.raw, dict) and self.raw.get(key) is not None

    def objects(self, key: str | None = None) -> list["Value"]:
        """A list of objects (this value, or its field ``key``): missing or ``null`` is
        an empty list, a bare object a list of one (older Jersey JSON writes a one-element
        list so)."""
        value = self if key is None else self.get(key)
        if value is None:
            return []
        if isinstance(value.raw, dict):
            return [value]
        if not isinstance(value.raw, list):
            raise value.error("a list of objects", value.raw)
        items = [Value(item, self.source, parent=value, key=i) for i, item in enumerate(value.raw)]
        for item in items:
            if not isinstance(item.raw, dict):
                raise item.error("a JSON object", item.raw)
        return items

    # ------------------------------------------------------------------ scalars
    def text(self, key: str, default: Any = _MISSING) -> str:
        found = self.get(key)
        if found is None:
            if default is _MISSING:
                raise self.error("a string (the field is required)", key=key)
            return default
        if not isinstance(found.raw, str):
            raise found.error("a string", found.raw)
        return found.raw

    def words(self, key: str) -> list[str]:
        """A list of strings, or one string of comma-separated words (Slurm writes node
        features and states either way, depending on the version); missing is empty."""
        found = self.get(key)
        if found is None:
            return []
        if isinstance(found.raw, str):
            return [w.strip() for w in found.raw.split(",") if w.strip()]
        if isinstance(found.raw, list) and all(isinstance(w, str) for w in found.raw):
            return [w.strip() for w in found.raw if w.strip()]
        raise found.error("a list of strings or a comma-separated string", found.raw)

    def number(self, key: str, default: Any = _MISSING, minimum: float | None = 0,
               maximum: float = LARGEST_NUMBER, limit: str | None = None) -> Any:
        """A finite number within the bounds; ``default`` when missing, ``null``, or (Slurm)
        wrapped as ``{"set": false}`` or ``{"infinite": true}``."""
        found = self.get(key)
        raw = None if found is None else unwrap_number(found.raw)
        if raw is None:
            if default is _MISSING:
                raise self.error("a number (the field is required)", key=key)
            return default
        bounds = "" if minimum is None else f" >= {minimum:g}"
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise found.error(f"a number{bounds}", found.raw)
        if not _finite(raw):
            raise found.error(f"a finite number{bounds}", raw)
        if (minimum is not None and raw < minimum) or (minimum is None and raw < -LARGEST_NUMBER):
            raise found.error(f"a number{bounds}", raw)
        if raw > maximum:
            where = f" ({limit} in conf/limits.py)" if limit else ""
            raise found.error(f"a number <= {maximum:,}{where}", raw)
        return raw

    def integer(self, key: str, default: Any = _MISSING, minimum: int | None = 0,
                maximum: int = LARGEST_NUMBER, limit: str | None = None) -> Any:
        value = self.number(key, default, minimum, maximum, limit)
        if value is default:
            return value
        if isinstance(value, float) and not value.is_integer():
            raise self.error("an integer", value, key=key)
        return int(value)

    def name(self, key: str) -> str:
        """A host, rack, label or GPU type name gangmaster accepts (as a cluster file's)."""
        value = self._object().get(key)
        if is_name(value):
            return value
        try:
            Fields(self._object(), self.source, self.path).name(key)      # the error cluster files give
        except ConfigError as exc:
            raise config_error(exc) from None
        raise AssertionError("Fields.name accepted what is_name refused")


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
