"""The YARN-like ResourceManager simulator.

Modules, bottom up: ``clock`` (virtual and real-time loops), ``ledger`` (node
capacity; the one place resources are booked), ``node_changes`` (which nodes
changed since an application's last heartbeat: its ``node_updates``), ``queues``,
``core`` (the RM: applications, containers, scheduler, faults), ``workload`` (what a
simulated task does: the workload model), ``nodemanager`` (simulated timers, or real
processes under a ``supervisor``, found through ``processes``), ``scenario`` (YAML
fault scripts), ``rm_settings`` (the ``rm:`` knobs), ``simulation`` (virtual-time
wiring with an in-process client and barrier coordinator), ``state`` (the live RM's
state file), ``live_rm`` (the one live wiring, real time, for ``rm serve`` and
``run --live``), ``server`` (gRPC). The AM side of the protocol is
``gangmaster.am.rm_protocol`` / ``gangmaster.am.rm_client``.
"""
