"""The YARN-like ResourceManager simulator.

Modules, bottom up: ``clock`` (virtual and real-time loops), ``ledger`` (node
capacity; the one place resources are booked), ``node_changes`` (which nodes
changed since an application's last heartbeat: its ``node_updates``), ``queues``;
the RM's collaborators, each the owner of its state and of its part of the state
file: ``records`` (an application, an ask, a container; ``RMEvent``), ``events``
(subscribers), ``queue_books`` (what each queue holds, what the cluster has free),
``nodes`` (node health and reports), ``containers`` (every container granted),
``applications`` (applications and attempts), ``asks`` (an allocate's asks checked
against the cluster), ``scheduler`` (the waiting asks and the pass), ``am_service``
(register, heartbeat, unregister); ``core`` (the ``ResourceManager`` front over them),
``audit`` (its books recounted, for tests), ``faults`` (the one table of fault actions:
scenarios, ``gangmaster rm fault``, gRPC), ``workload`` (what a simulated task does),
``nodemanager`` (simulated timers) and ``process_nodemanager`` (real processes under a
``supervisor``, found through ``processes``), ``scenario`` (YAML fault scripts),
``rm_settings`` (the ``rm:`` knobs), ``simulation`` (virtual-time wiring with an
in-process client and barrier coordinator), ``state`` (the live RM's state file),
``live_rm`` (the one live wiring, real time, for ``rm serve`` and ``run --live``),
``server`` (gRPC). The AM side of the protocol is ``gangmaster.protocol.rm_protocol`` /
``gangmaster.protocol.rm_client``.
"""
