"""A one-line progress bar for long replays: jobs done / total, rate, ETA.

Drawn on a terminal only (the command passes ``enabled=False`` under ``--json`` or when
stderr is not a TTY: a log gets no bar and no periodic lines, only the command's own
output), redrawn at most every :data:`REDRAW_S` so that drawing never costs more than the
replay it reports on.

The line fits the terminal (``shutil.get_terminal_size``, read at each redraw so a resized
window is followed): it stays one column short of the width, since a line that fills the
last column wraps on many terminals and every ``\\r`` redraw would then scroll a new line.
What gives way, in order: the bar's width (down to :data:`MIN_WIDTH`), then the bar, the
rate, the label. No progress library: the line is 40 lines of standard library, and tqdm or
rich would be a dependency for the one thing this module does.
"""
from __future__ import annotations

import shutil
import sys
import time
from typing import Callable, TextIO

REDRAW_S = 0.2
#: The bar's width when the terminal has room for it, and the narrowest worth drawing.
WIDTH = 28
MIN_WIDTH = 8


def eta_text(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def terminal_columns() -> int:
    return shutil.get_terminal_size(fallback=(80, 24)).columns


class ProgressBar:
    """``bar(done, total)`` as the engine's ``progress`` callback; ``close()`` ends the line.
    ``columns``: the terminal's width, read at each redraw (a test passes its own)."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic, columns: Callable[[], int] = terminal_columns,
                 unit: str = "jobs"):
        self.label, self.stream, self.enabled, self.clock = label, stream or sys.stderr, enabled, clock
        self.unit = unit      # what is counted ("jobs"; a --workloads family counts "replays")
        self.columns = columns
        self.started = clock()
        self.last_drawn: float | None = None
        self.drawn = 0        # length of the line drawn last (0: none yet)

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if self.last_drawn is not None and now - self.last_drawn < REDRAW_S and done < total:
            return
        self.last_drawn = now
        line = self.line(done, total, now - self.started, self.columns() - 1)
        self.stream.write("\r" + line.ljust(self.drawn))   # spaces over what a longer line left
        self.stream.flush()
        self.drawn = max(len(line), 1)

    def line(self, done: int, total: int, elapsed: float, fit: int = 10 ** 6) -> str:
        """The line, at most ``fit`` characters (see the module's docstring for what gives way)."""
        share = done / total if total else 1.0
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = eta_text((total - done) / rate) if rate > 0 else "?"
        speed = f"{rate:,.0f} {self.unit}/s" if rate >= 1 or not rate else f"{60 * rate:,.1f} {self.unit}/min"
        counts, left = f"{done:,}/{total:,} {self.unit}", f"ETA {eta}"
        text = f"{self.label} {counts} {speed} {left}"
        room = fit - len(text) - 3                          # " [" + bar + "]"
        if room >= MIN_WIDTH:
            width = min(WIDTH, room)
            filled = int(width * share)
            return f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {counts} {speed} {left}"
        for shorter in (text, f"{self.label} {counts} {left}", f"{counts} {left}", counts):
            if len(shorter) <= fit:
                return shorter
        return counts[:max(fit, 0)]

    def clear(self) -> None:
        """Wipe the bar's line (before a line of other output); the next call draws it again."""
        if self.drawn:
            self.stream.write("\r" + " " * self.drawn + "\r")
            self.stream.flush()
            self.drawn, self.last_drawn = 0, None

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
