"""A one-line progress bar for long replays: jobs done / total, rate, ETA.

Drawn on a terminal only (the command passes ``enabled=False`` under ``--json`` or when
stderr is not a TTY), redrawn at most every :data:`REDRAW_S` so that drawing never
costs more than the replay it reports on.
"""
from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

REDRAW_S = 0.2
WIDTH = 28


def eta_text(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


class ProgressBar:
    """``bar(done, total)`` as the engine's ``progress`` callback; ``close()`` ends the line."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        self.label, self.stream, self.enabled, self.clock = label, stream or sys.stderr, enabled, clock
        self.started = clock()
        self.last_drawn: float | None = None
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if self.last_drawn is not None and now - self.last_drawn < REDRAW_S and done < total:
            return
        self.last_drawn = now
        self.stream.write("\r" + self.line(done, total, now - self.started))
        self.stream.flush()
        self.drawn = True

    def line(self, done: int, total: int, elapsed: float) -> str:
        share = done / total if total else 1.0
        filled = int(WIDTH * share)
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = eta_text((total - done) / rate) if rate > 0 else "?"
        return (f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {done:,}/{total:,} jobs "
                f"{rate:,.0f} jobs/s ETA {eta} ")

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
