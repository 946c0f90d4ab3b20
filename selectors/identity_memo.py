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
    are not shared would otherwise grow it for ever)."""

    __slots__ = ("_answers", "limit")

    def __init__(self, limit: int):
        self._answers: dict[Hashable, tuple[tuple, Answer]] = {}
        self.limit = limit

    def get(self, key: Hashable, default=None):
        """The answer kept under ``key``, else ``default``."""
        kept = self._answers.get(key)
        return default if kept is None else kept[1]

    def put(self, key: Hashable, objects: tuple, answer: Answer) -> Answer:
        """Keep ``answer`` under ``key`` (the ids of ``objects``, kept alive with it); returns it."""
        answers = self._answers
        if len(answers) >= self.limit:
            answers.clear()
        answers[key] = (objects, answer)
        return answer

    def clear(self) -> None:
        self._answers.clear()

    def __len__(self) -> int:
        return len(self._answers)
