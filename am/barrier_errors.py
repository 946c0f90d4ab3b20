"""Kept for training scripts written against it: the errors of barrier calls are
:mod:`gangmaster.am.task`'s (what a training process imports) and
:mod:`gangmaster.am.barrier.errors`', which this module re-exports."""
from gangmaster.am.barrier.errors import *  # noqa: F401,F403
from gangmaster.am.barrier.errors import __all__  # noqa: F401
