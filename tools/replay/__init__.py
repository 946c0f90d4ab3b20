"""Trace replay (`gangmaster replay`): real workload traces through the AM and RM.

Modules: ``trace`` (the job table every reader produces), ``philly``, ``tiresias`` and
``native`` (the readers, on ``trace_csv``'s row reading and bad-row handling),
``clusters`` (presets, cluster files, sized and inferred clusters), ``engine`` (the
replay itself), ``metrics`` (REPLAY.md's definitions), ``report`` and ``plots`` (the
report folder), ``progress`` (the terminal progress bar).
"""
