"""Slurm as the ResourceManager behind the AM (a tool-level integration).

* :mod:`.slurm_json` reads Slurm's JSON (``scontrol show node --json``, ``squeue
  --json``) defensively, across the schema changes between versions.
* :mod:`.values` says how Slurm writes one value (numbers, state words, GRES) in every
  version seen; the snapshot reader (``tools/snapshots/slurm.py``) reads them with it too.
* :mod:`.names` is the one place that says how gangmaster's vocabulary (racks, labels,
  exact GPUs, topology presets) is written as Slurm node features and GRES types.
* :mod:`.client` is the :class:`~gangmaster.protocol.rm_client.RMClient` that talks to Slurm:
  a gang's asks become one heterogeneous job, tasks become job steps.
* :mod:`.launcher` is the per-application launcher (a job's batch step) that runs the
  tasks, so they outlive the AM.
* :mod:`.local_cluster` writes a Slurm configuration from a gangmaster cluster file and
  runs a whole cluster (one ``slurmctld``, one ``slurmd`` per node) on this machine.
* :mod:`.runs` drives jobs through the AM on Slurm (``gangmaster run --rm slurm``).
"""
