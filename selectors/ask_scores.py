"""Strategies that score each node 0..100 for the GPUs a task asks, as the FGD artifact's
score plugins do (``packing``, ``clustering``): one node key per (GPUs, share) asked, built
once and kept, whose value is ``100 − score`` (the lowest key is taken first) and
:data:`CANNOT_TAKE` where the score is negative (the ask does not fit)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .fragmentation import CANNOT_TAKE
from .selector import NodeKey, Selector

#: (view, rows, GPUs asked, share asked in milli-GPU) -> each row's score, -1 where it does not fit
AskScores = Callable[..., np.ndarray]


class AskScoreSelector(Selector):
    """A strategy ranked by :attr:`scores`, a function of the view's rows and the ask."""

    scores: AskScores

    def __init__(self, candidate_nodes_factor: int = 2):
        super().__init__(candidate_nodes_factor)
        self._node_keys: dict[tuple[int, int], NodeKey] = {}

    def node_key(self, request):
        ask = (request.resource.gpus, request.resource.gpu_milli)
        key = self._node_keys.get(ask)
        if key is None:
            scores = type(self).scores

            def keys(view, rows, ask=ask):
                score = scores(view, rows, *ask)
                return np.where(score < 0, CANNOT_TAKE, 100 - score)
            key = self._node_keys[ask] = NodeKey(f"{self.name}:{ask[0]}:{ask[1]}", keys)
        return key
