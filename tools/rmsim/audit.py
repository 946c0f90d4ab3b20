"""The RM's books, recounted: every node's and every queue's usage counted again from
the live containers and compared with what the ledger and the queue books say
(``free + used == capacity``, no GPU or port booked twice, no queue over its limit).

Nothing in the RM's own path asks for this: tests (the property tests above all) and
benchmarks call :func:`check_books` after driving an RM, to pin that its incremental
books never drift from the truth. It reads the RM's public state only.
"""
from __future__ import annotations

import numpy as np

from gangmaster.selectors.fit import GPU_MILLI


def check_books(rm) -> None:
    """Recount every node from the live containers; raise AssertionError on any double
    booking or drift (``free + used == capacity``)."""
    ledger = rm.ledger
    for i in range(len(ledger)):
        mem = mvc = 0
        mask = 0
        shares = np.zeros(ledger.gpu_width, dtype=np.int64)   # milli-GPU held by shares, per GPU
        ports = []
        for cid in rm.node_containers[i]:
            b = rm.containers[cid].booking
            c = rm.containers[cid]
            assert not c.state.finished or c.held, f"finished container {cid} still on node"
            if b.gpu_milli:
                shares[b.gpu_mask.bit_length() - 1] += b.gpu_milli
            else:
                assert not (mask & b.gpu_mask), f"{ledger.hosts[i]}: GPU mask {b.gpu_mask:#x} double-booked"
                mask |= b.gpu_mask
            mem += b.memory_mb
            mvc += b.mvcores
            ports.extend(b.port_ranges)
        shared_mask = _check_gpu_shares(ledger, i, mask, shares)
        assert len(ports) == len(set(ports)), f"{ledger.hosts[i]}: a port is double-booked"
        assert mem + ledger.memory_free[i] == ledger.memory_capacity[i], f"{ledger.hosts[i]}: memory drift"
        assert mvc + ledger.mvcores_free[i] == ledger.mvcores_capacity[i], f"{ledger.hosts[i]}: vcores drift"
        free_mask, capacity_mask = int(ledger.gpu_free_mask[i]), int(ledger.gpu_capacity_mask[i])
        assert mask | free_mask | shared_mask == capacity_mask and not (mask & free_mask), \
            f"{ledger.hosts[i]}: GPU masks drift"
        assert bin(free_mask).count("1") == ledger.gpus_free[i], f"{ledger.hosts[i]}: GPU count drift"
        assert ledger.memory_free[i] >= 0 and ledger.mvcores_free[i] >= 0, f"{ledger.hosts[i]}: negative free"
        used_ports = set(ports)
        assert not used_ports & set(ledger.ports_free[i]), f"{ledger.hosts[i]}: a used port is free"
        assert used_ports | set(ledger.ports_free[i]) == set(ledger.port_capacity[i]), \
            f"{ledger.hosts[i]}: ports drift"
    for q in rm.queues.values():
        live = [c for c in rm.containers.values()
                if (not c.state.finished or c.held) and rm.apps[c.app_id].queue == q.name]
        assert q.used_mem == sum(c.booking.memory_mb for c in live), f"queue {q.name}: memory drift"
        assert q.used_gpus == sum(c.booking.demand.gpus for c in live), f"queue {q.name}: GPU drift"
        assert q.used_gpu_milli == sum(c.booking.gpu_milli for c in live), f"queue {q.name}: GPU share drift"
        assert q.used_mem <= q.max_mem and q.used_mvc <= q.max_mvc and q.gpu_milli_used <= q.max_gpus * GPU_MILLI, \
            f"queue {q.name}: over its limit"
    mem, mvc, gpus = rm.books.totals
    free = [rm.books.free_mem, rm.books.free_mvc, rm.books.free_gpu_milli]
    assert free == [mem - sum(q.used_mem for q in rm.queues.values()),
                    mvc - sum(q.used_mvc for q in rm.queues.values()),
                    gpus * GPU_MILLI - sum(q.gpu_milli_used for q in rm.queues.values())], \
        "the queues' totals drift"
    assert rm.applications.running == sum(len(q.apps) for q in rm.queues.values()), "running applications drift"
    assert rm.finished_apps.keys() == {a for a, app in rm.apps.items() if app.state.finished}, \
        "finished applications drift"
    assert free == [int(ledger.memory_free.sum()), int(ledger.mvcores_free.sum()),
                    int(ledger.gpu_milli_free.sum())], "the queues' usage and the nodes' free drift"


def _check_gpu_shares(ledger, i: int, whole_mask: int, shares: np.ndarray) -> int:
    """Node ``i``'s GPUs, recounted from its containers (whole GPUs by ``whole_mask``, shares
    in milli per GPU): each GPU wholly free, taken whole, or holding shares that leave
    free + used = 1000; never a share on a GPU taken whole or past 1000 on one GPU.
    Returns the mask of the GPUs holding shares."""
    host = ledger.hosts[i]
    present = np.arange(ledger.gpu_width) < ledger.gpu_capacity.item(i)
    shared = shares > 0
    assert not (shares[~present]).any(), f"{host}: a share on a GPU the node does not have"
    assert (shares <= GPU_MILLI).all(), f"{host}: a GPU shared past {GPU_MILLI} milli: {shares.tolist()}"
    shared_mask = int(sum(1 << int(g) for g in np.flatnonzero(shared)))
    assert not (shared_mask & whole_mask), f"{host}: a share on a GPU taken whole"
    assert np.array_equal(ledger.gpu_share_used[i], shares), \
        f"{host}: share ledger {ledger.gpu_share_used[i].tolist()} != containers' {shares.tolist()}"
    assert ledger.gpus_shared.item(i) == int(shared.sum()), f"{host}: count of shared GPUs drift"
    milli_free = ledger.gpu_milli_free_rows([i])[0]
    used = np.where(shared, shares, np.where([whole_mask >> g & 1 for g in range(ledger.gpu_width)],
                                              GPU_MILLI, 0))
    assert ((milli_free + used)[present] == GPU_MILLI).all() and not milli_free[~present].any(), \
        f"{host}: per GPU free {milli_free.tolist()} + used {used.tolist()} != {GPU_MILLI}"
    free_mask = int(ledger.gpu_free_mask[i])
    assert not (shared_mask & free_mask), f"{host}: a GPU holding shares is in the free mask"
    return shared_mask
