"""The YARN-like ResourceManager simulator.

Modules, bottom up: ``clock`` (virtual and real-time loops), ``ledger`` (node
capacity; the one place resources are booked), ``queues``, ``core`` (the RM:
applications, containers, scheduler, faults), ``workload`` (what a simulated task
does: the workload model), ``nodemanager`` (simulated timers, or real processes),
``scenario`` (YAML fault scripts), ``simulation`` (virtual-time wiring with an
in-process client and barrier coordinator), ``state`` (the live RM's state file),
``server`` (gRPC). The AM side of the protocol is ``gangmaster.am.rm_protocol`` /
``gangmaster.am.rm_client``.
"""
