"""Files that hold secrets (barrier tokens), readable by their owner only.

A file made with ``open(path, "w")`` gets mode ``0666 & ~umask`` — world-readable
under the usual umask 022 — so anyone on the machine could read the barrier token
the AM's journal keeps for a restarted AM, and join the gang's barrier. Files opened
here are created with mode 0600 (``os.open``'s mode, which a umask can only narrow),
and an existing file is narrowed to 0600 when opened, whatever the umask. Mode ``"x"``
creates a new file only (``FileExistsError`` otherwise), as ``open``'s does::

    with open_private(work_dir / "journal.jsonl", "a") as f:
        f.write(line)
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import IO

__all__ = ["open_private", "PRIVATE_MODE"]

PRIVATE_MODE = 0o600
_FLAGS = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
          "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL}


def open_private(path: str | Path, mode: str = "w", encoding: str = "utf-8") -> IO[str]:
    """Open ``path`` for writing (``"w"``), appending (``"a"``) or exclusive creation
    (``"x"``) as text, with mode 0600."""
    try:
        flags = _FLAGS[mode]
    except KeyError:
        raise ValueError(f"open_private: mode must be 'w', 'a' or 'x', not {mode!r}") from None
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), PRIVATE_MODE)
    try:
        os.fchmod(fd, PRIVATE_MODE)  # an existing file keeps its old mode otherwise
        return os.fdopen(fd, mode, encoding=encoding)
    except BaseException:
        os.close(fd)
        raise
