"""JSON objects with each key once: the ``object_pairs_hook`` every JSON reader of
outside data uses (snapshot files, tools/snapshots/json_doc.py; live Slurm JSON,
tools/slurm/slurm_json.py).

``json.loads`` keeps the last of two equal keys without a word (``"cpus": 8, "cpus":
4000`` reads 4000), as YAML readers refuse to. The hook only marks such an object (a
:class:`Duplicated` dict naming the key); where it is is looked for afterwards
(:func:`first_duplicate`), and only then, since parsing does not know where it is."""
from __future__ import annotations

from typing import Any


class DuplicateKeys:
    """``json.loads(text, object_pairs_hook=hook.object)``; then ``hook.seen`` says
    whether some object had a key twice."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False

    def object(self, pairs: list[tuple[str, Any]]) -> dict:
        found = dict(pairs)
        if len(found) == len(pairs):
            return found
        self.seen = True
        keys: set[str] = set()
        for key, _ in pairs:
            if key in keys:
                return Duplicated(found, key)
            keys.add(key)
        raise AssertionError("fewer keys than pairs, yet none repeated")


class Duplicated(dict):
    """An object that had ``key`` twice (the last value kept, as ``json.loads`` does)."""

    def __init__(self, found: dict, key: str):
        super().__init__(found)
        self.key = key


def first_duplicate(raw: Any) -> tuple[list[str | int], str]:
    """The keys from the top down to the first object (depth first) with a key given
    twice, and that key."""
    pending: list[tuple[list[str | int], Any]] = [([], raw)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, Duplicated):
            return path, value.key
        children = value.items() if isinstance(value, dict) else enumerate(value)
        pending.extend(reversed([(path + [key], child) for key, child in children
                                 if isinstance(child, (dict, list))]))
    raise AssertionError("a duplicate key was seen but is in no object")
