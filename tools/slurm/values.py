"""How Slurm writes one value in its JSON, across versions: the one place both readers learn it.

Slurm's JSON is read twice in gangmaster: by the RM client (:mod:`.slurm_json`, lenient:
what it does not understand reads as a default, so a new field never stops the AM) and by
the snapshot reader (:mod:`gangmaster.tools.snapshots.slurm`, strict: what it refuses is
named by file, JSON path and what was expected). Both take the shapes of single values
from here, so a shape learned for one is learned for both:

* numbers: a plain number (22.05), or ``{"set": bool, "infinite": bool, "number": n}``
  (23.02 and later), where unset or infinite means "not reported";
* state words: ``"idle"``, ``"down+drain"``, ``"MIXED*"`` (sinfo's flag suffixes), or
  lists of them (``["IDLE", "DRAIN"]``), read as upper-case words in order, each once;
* GRES: entries ``name[:type][:count][(extra)]`` at the top-level commas of a string
  (or a list of strings): ``gpu:v100:8(S:0-1)``, ``gpu:4``, ``gpu``, one type per GPU
  ``gpu:V100_3:1``, in use ``gpu:v100:2(IDX:0-1)``, none ``gpu:(null):0(IDX:N/A)``;
* index lists ``0,2-3``, and the top-level comma split shared with hostlists
  (``dgx[01-04,07],cpu1``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: Characters sinfo appends to a state word as flags (``down*``: not responding).
_STATE_FLAG_SUFFIXES = "*~#!%$@^-"
_NOT_A_GRES = ("(null)", "N/A")


# ------------------------------------------------------------------- numbers
def unwrap_number(raw: Any) -> Any:
    """Newer Slurm's ``{"set", "infinite", "number"}``: its number when set and finite,
    ``None`` (not reported) when unset or infinite; any other value as it is."""
    if isinstance(raw, dict) and "number" in raw:
        if raw.get("set") is False or raw.get("infinite") is True:
            return None
        return raw["number"]
    return raw


def number(value: Any, default: Any = 0) -> Any:
    """A number in either shape, leniently: ``default`` for one not reported, and for
    anything that is no number (the RM client's reading; the snapshot reader refuses it)."""
    value = unwrap_number(value)
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value) if "." in str(value) else int(value)
    except (TypeError, ValueError):
        return default


# --------------------------------------------------------------- state words
def state_words(*values: Any) -> tuple[str, ...]:
    """State words, upper-case, in order, each once, from strings (``"idle"``,
    ``"down+drain"``, ``"MIXED*"``) and lists of them; anything else is skipped."""
    found: dict[str, None] = {}
    for value in values:
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str):
                for part in re.split(r"[+,\s]+", item.strip().upper()):
                    part = part.rstrip(_STATE_FLAG_SUFFIXES)
                    if part:
                        found[part] = None
    return tuple(found)


# ---------------------------------------------------------- lists and GRES
def top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses and brackets, each part stripped,
    empty ones dropped: ``gpu:a100:2(IDX:0,2),mps:100`` → two, ``dgx[1-2],cpu1`` → two."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def indices(text: str) -> list[int]:
    """``0,2-3`` → [0, 2, 3]; ``N/A`` → []."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if re.fullmatch(r"\d+", part):
            out.append(int(part))
        elif re.fullmatch(r"\d+-\d+", part):
            low, high = map(int, part.split("-"))
            out.extend(range(low, high + 1))
    return out


class GresError(ValueError):
    """A ``gpu`` GRES entry not written as ``gpu[:type][:count][(extra)]`` (the entry is the message)."""


@dataclass(frozen=True)
class GresEntry:
    """One entry of a GRES string: ``gpu:V100_3:1(IDX:3)``."""

    name: str
    type: str | None
    count: int
    idx: tuple[int, ...] = ()

    @classmethod
    def parse(cls, entry: str) -> "GresEntry | None":
        """The entry, or ``None`` when it is not ``name[:type][:count][(extra)]``
        (a type of ``(null)`` is no type)."""
        body, extra = entry.strip(), ""
        suffix = re.search(r"\(([^()]*)\)$", body)
        if suffix and not body[:suffix.start()].endswith(":"):       # "gpu:(null)" is a type
            body, extra = body[:suffix.start()], suffix.group(1)
        parts = body.split(":")
        if not parts[0] or "(" in parts[0]:
            return None
        if len(parts) > 1 and parts[-1].isdigit():
            count, gres_type = int(parts[-1]), parts[1] if len(parts) > 2 else None
        elif len(parts) <= 2:
            count, gres_type = 1, parts[1] if len(parts) == 2 else None
        else:
            return None
        found = re.search(r"IDX:([0-9,\-]+|N/A)", extra)
        idx = tuple(indices(found.group(1))) if found else ()
        return cls(parts[0], None if gres_type in ("", "(null)") else gres_type, count, idx)


def split_gres(text: Any) -> list[str]:
    """The entries of a GRES string or a list of them; ``(null)`` and ``N/A`` are none."""
    if isinstance(text, (list, tuple)):
        return [entry for part in text for entry in split_gres(part)]
    if not isinstance(text, str):
        return []
    return [entry for entry in top_level_split(text) if entry not in _NOT_A_GRES]


def gpu_entries(text: Any, strict: bool = False) -> list[GresEntry]:
    """The ``gpu`` entries of a GRES string (or list). A ``gpu`` entry not understood is
    skipped, or with ``strict`` raises :class:`GresError`; other GRES are skipped."""
    entries = []
    for raw in split_gres(text):
        entry = GresEntry.parse(raw)
        if entry is None and strict and raw.split(":")[0] == "gpu":
            raise GresError(raw)
        if entry is not None and entry.name == "gpu":
            entries.append(entry)
    return entries
