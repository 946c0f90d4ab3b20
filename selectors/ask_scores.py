"""Strategies that score each node 0..100 for what a task asks, as the FGD artifact's score
plugins do (``packing``, ``clustering``, ``best-fit``, ``dot-product``): one node key per ask
(by default the GPUs and share asked; :meth:`AskScoreSelector.ask`), built once and kept,
whose value is ``100 − score`` (the lowest key is taken first) and :data:`CANNOT_TAKE` where
the score is negative (the ask does not fit).

The artifact's two vector scores (``best-fit``, ``dot-product``) read a node as its
``NodeResource.ToResourceVec``, (milli-vcores free, milli-GPU free on all its GPUs), and a
task as (milli-vcores, milli-GPU in all), both over the largest machine of the trace
(:data:`MAX_MVCORES`, :data:`MAX_GPU_MILLI`): :func:`resource_vectors`, :func:`vector_ask`."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .fit import GPU_MILLI, milli
from .fragmentation import CANNOT_TAKE
from .selector import NodeKey, Selector

#: (view, rows, *ask) -> each row's score, -1 where it does not fit
AskScores = Callable[..., np.ndarray]
#: the artifact's normalisers (``MaxSpecCpu``, ``MaxSpecGpu``): 128 vcores and 8 GPUs, the trace's largest machine
MAX_MVCORES = 128_000
MAX_GPU_MILLI = 8 * GPU_MILLI


class AskScoreSelector(Selector):
    """A strategy ranked by :attr:`scores`, a function of the view's rows and the ask."""

    scores: AskScores
    #: :attr:`scores` of one row as a Python int, when given (``row_score(view, i, *ask)``,
    #: plain Python: the view brings a few changed rows up to date with it, NodeKey.compute_row)
    row_score: Callable[..., int] | None = None

    def __init__(self, candidate_nodes_factor: int = 2):
        super().__init__(candidate_nodes_factor)
        self._node_keys: dict[tuple[int, ...], NodeKey] = {}

    def ask(self, request) -> tuple[int, ...]:
        """What of the request the scores read, after the rows: (GPUs, share in milli-GPU)."""
        return request.resource.gpus, request.resource.gpu_milli

    def node_key(self, request):
        ask = self.ask(request)
        key = self._node_keys.get(ask)
        if key is None:
            scores, row_score = type(self).scores, type(self).row_score

            def keys(view, rows, ask=ask):
                score = scores(view, rows, *ask)
                return np.where(score < 0, CANNOT_TAKE, 100 - score)

            def row_key(view, i, ask=ask):
                score = row_score(view, i, *ask)
                return CANNOT_TAKE if score < 0 else 100 - score
            key = self._node_keys[ask] = NodeKey(":".join(map(str, (self.name, *ask))), keys,
                                                 None if row_score is None else row_key)
        return key


def vector_ask(request) -> tuple[int, int]:
    """A task as the artifact's ``PodResource.ToResourceVec`` reads it: milli-vcores, and
    milli-GPU in all (1000 per whole GPU, the share's milli, 0 for none)."""
    resource = request.resource
    return milli(resource.vcores), resource.gpus * GPU_MILLI + resource.gpu_milli


def resource_vectors(view, rows, mvcores: int, gpu_milli_total: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node of ``rows``, as the artifact's ``NodeResource.ToResourceVec`` reads it: the
    milli-vcores free and the milli-GPU free on all its GPUs (float64, as the Go code computes
    in), and whether both are at least the ask (the artifact's best-fit scores -1 otherwise)."""
    gpu_left = view.gpu_milli_free_rows(rows).sum(axis=1, dtype=np.int64)
    cpu_left = np.asarray(view.mvcores_free[rows], dtype=np.int64)
    fits = (cpu_left >= mvcores) & (gpu_left >= gpu_milli_total)
    return cpu_left.astype(np.float64), gpu_left.astype(np.float64), fits


def resource_vector(view, i: int) -> tuple[int, int]:
    """:func:`resource_vectors` of node ``i`` in plain Python, as ints (Python's float
    arithmetic on them is the same float64)."""
    return view.mvcores_free.item(i), sum(view.gpu_milli_free_row(i))
