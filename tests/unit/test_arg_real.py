"""`arg_types.real`: a bounded, finite number, each bound open or closed as asked."""
from __future__ import annotations

import argparse

import pytest

from gangmaster.tools.arg_types import real


def test_closed_bounds_take_the_bounds_and_open_ones_refuse_them():
    closed, open_both = real(0, 1), real(0, 1, low_open=True, high_open=True)
    assert closed("0") == 0.0 and closed("1") == 1.0 and closed("0.25") == 0.25
    assert open_both("0.5") == 0.5
    for text in ("0", "1"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"expected a number > 0 and < 1"):
            open_both(text)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "-0.1", "1.5", "x", ""])
def test_what_is_not_a_finite_number_in_range_is_refused_saying_what_was_expected(text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected a number >= 0 and <= 1, got"):
        real(0, 1)(text)
