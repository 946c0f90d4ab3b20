"""Who hears what the RM does: its subscribers, by kind of :class:`~.records.RMEvent`.

An event nobody asked for is never built (a 6,001-container gang would make 18,000 of
them): a collaborator whose event costs work to describe asks ``kind in events.heard``
first, and :meth:`Events.emit` asks for the others. ``heard`` is one dict, changed in
place when someone subscribes, so a collaborator may keep it as its own attribute.
"""
from __future__ import annotations

from typing import Callable, Iterable

from .records import EVENT_KINDS, RMEvent

Listener = Callable[[RMEvent], None]


class Events:
    """The RM's subscribers; ``now`` stamps each event with the RM clock's time."""

    def __init__(self, now: Callable[[], float]):
        self.now = now
        self._by_kind: dict[str | None, list[Listener]] = {}   # by kind (None: every kind)
        #: the kinds someone subscribed to (all, for a None subscriber), each with who hears it, in order
        self.heard: dict[str, tuple[Listener, ...]] = {}

    def subscribe(self, fn: Listener, kinds: Iterable[str] | None = None) -> None:
        """Call ``fn(event)`` for every event, or for those of ``kinds`` only."""
        by_kind = self._by_kind
        for kind in (None,) if kinds is None else kinds:
            by_kind.setdefault(kind, []).append(fn)
        every = by_kind.get(None, [])
        self.heard.clear()
        self.heard.update({kind: (*every, *by_kind.get(kind, ())) for kind in EVENT_KINDS
                           if every or kind in by_kind})

    def emit(self, kind: str, app_id: str = "", container_id: str = "", host: str = "",
             detail: str | tuple = "") -> None:
        """Tell the subscribers of ``kind`` (none: nothing is built)."""
        listeners = self.heard.get(kind)
        if listeners:
            event = RMEvent(self.now(), kind, app_id, container_id, host, detail)
            for fn in listeners:
                fn(event)
