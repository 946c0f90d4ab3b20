"""Barriers for a gang's tasks: the coordinator's core (:mod:`.coordinator`, no gRPC), served
over gRPC (:mod:`.server`) or run in process on a simulation's clock (:mod:`.in_process`),
the tasks of one host meeting locally first (:mod:`.local`), its configuration and errors,
the AM's calls to it (:mod:`.gang_barrier`, :mod:`.attempt_barrier`) and the task side
(:mod:`.task_context`). Training processes import the task side through
:mod:`gangmaster.am.task`."""
