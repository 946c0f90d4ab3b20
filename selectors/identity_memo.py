"""Answers about objects nobody changes, found by the objects' identity: :class:`IdentityMemo`.

A trace replay asks the same question of the same few objects again and again (a gang
shape's roles, an ask's descriptor, the cluster's node list, the workload's shapes), and
hashing them by value costs more than the answer's lookup should (a descriptor's or a
role's hash is computed in Python). Keyed by their ``id()`` instead, each answer keeps
the objects it is about: while it is kept they live, so no other object can take their
ids, and a key found is always the objects' own.
"""
from __future__ import annotations

from typing import Generic, Hashable, TypeVar

Answer = TypeVar("Answer")


class IdentityMemo(Generic[Answer]):
    """At most ``limit`` answers, each under a key made of ``id()``s of the objects it is
    about (and any plain values); past the limit it starts afresh (callers whose objects
    are not shared would otherwise grow it for ever).

    The answers and the objects they keep alive are two dicts under the same keys, so that
    :meth:`get` is the answers' own ``dict.get`` (no Python call per look-up)."""

    __slots__ = ("_answers", "_objects", "limit", "get")

    def __init__(self, limit: int):
        self._answers: dict[Hashable, Answer] = {}
        self._objects: dict[Hashable, tuple] = {}
        self.limit = limit
        #: ``get(key, default=None)``: the answer kept under ``key``, else ``default``
        self.get = self._answers.get

    def put(self, key: Hashable, objects: tuple, answer: Answer) -> Answer:
        """Keep ``answer`` under ``key`` (the ids of ``objects``, kept alive with it); returns it."""
        answers = self._answers
        if len(answers) >= self.limit:
            self.clear()
        answers[key] = answer
        self._objects[key] = objects
        return answer

    def clear(self) -> None:
        self._answers.clear()
        self._objects.clear()

    def __len__(self) -> int:
        return len(self._answers)
