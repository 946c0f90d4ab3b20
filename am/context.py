"""Kept for training scripts written against it: the task side of barriers is
:mod:`gangmaster.am.task` (what a training process imports) and, in full,
:mod:`gangmaster.am.barrier.task_context`, which this module re-exports."""
from gangmaster.am.barrier.task_context import *  # noqa: F401,F403
from gangmaster.am.barrier.task_context import __all__  # noqa: F401
