"""Types for command-line values that argparse's ``int`` and ``float`` let through: a port
past 65535 (gRPC then silently listens on a random one), ``nan`` or ``inf`` seconds. Each
refuses at parse time, so the command exits 2 with usage and the reason."""
from __future__ import annotations

import argparse
import math
import re

from gangmaster.conf.limits import MAX_DURATION_S


def port_number(text: str) -> int:
    """A TCP port, 0..65535 (0: any free port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {port}")
    return port


def seconds(text: str) -> float:
    """A finite duration > 0, at most MAX_DURATION_S (ten years)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= MAX_DURATION_S):
        raise argparse.ArgumentTypeError(f"expected seconds > 0 and <= {MAX_DURATION_S:,.0f} "
                                         f"(MAX_DURATION_S), got {text}")
    return value


def address(text: str) -> str:
    """``host:port`` of a server, the port 1..65535."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port 1..65535, got {text!r}")
    return text


def count(minimum: int = 1, maximum: int = 10 ** 9, limit: str = ""):
    """An integer within ``minimum``..``maximum``: how many of something to make or time;
    ``limit``, the name of the documented limit (conf/limits.py) the maximum is, said in
    the message."""
    expected = f"expected an integer {minimum}..{maximum:,}" + (f" ({limit})" if limit else "")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{expected}, got {value}")
        return value
    parse.__name__ = "count"
    return parse


def count_list(minimum: int = 1, maximum: int = 10 ** 9, limit: str = ""):
    """A comma-separated list of :func:`count` values, e.g. ``2,8,64``; a bad item is named
    with the list it stands in."""
    one = count(minimum, maximum, limit)

    def parse(text: str) -> list[int]:
        values = []
        for part in text.split(","):
            try:
                values.append(one(part.strip()))
            except argparse.ArgumentTypeError as exc:
                raise argparse.ArgumentTypeError(f"{exc} in {text!r}" if "," in text else str(exc)) from None
        return values
    parse.__name__ = "counts"
    return parse


#: Positive integers separated by commas.
counts = count_list()


def allow_negative_values(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Let ``parser`` take a value that starts with a minus sign and a digit (``-3,4``) as
    the value of the option before it, so that its type can say what is wrong with it:
    argparse reads only a plain ``-3`` or ``-0.5`` as a value, and anything else that
    starts with ``-`` as an unknown option ("expected one argument"). The parser must
    have no option that looks like a negative number (none of gangmaster's does)."""
    parser._negative_number_matcher = re.compile(r"-\.?\d")   # argparse's own attribute, read with match()
    return parser


def real(low: float, high: float, *, low_open: bool = False, high_open: bool = False):
    """A finite number between ``low`` and ``high`` (each bound included unless ``*_open``):
    a factor, a share."""
    low_sign, high_sign = (">" if low_open else ">="), ("<" if high_open else "<=")
    expected = f"expected a number {low_sign} {low:g} and {high_sign} {high:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (math.isfinite(value) and above and below):
            raise argparse.ArgumentTypeError(f"{expected}, got {text}")
        return value
    parse.__name__ = "real"
    return parse


#: A seed for Python's and numpy's generators (numpy refuses negative ones).
seed = count(0, 2 ** 63 - 1)


def epoch_seconds(text: str) -> float:
    """A moment as seconds since the epoch (a snapshot's time): finite, >= 0, before 2^40."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds since the epoch, got {text!r}") from None
    if not (math.isfinite(value) and 0 <= value < 2 ** 40):
        raise argparse.ArgumentTypeError(f"expected seconds since the epoch, got {text}")
    return value
