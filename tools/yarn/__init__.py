"""Apache Hadoop YARN as the ResourceManager behind the AM (a tool-level integration).

* :mod:`.local_cluster` runs a real YARN cluster on this machine (one ResourceManager, one
  NodeManager per node of a gangmaster cluster file) from Apache's jars, resolved by Maven
  from the checked-in ``pom.xml``.
* :mod:`.rest` is the RM's REST API: submit, kill and watch applications without Java.
* :mod:`.credentials` reads the token storage file YARN gives a container
  (``HADOOP_TOKEN_FILE_LOCATION``): the AM's AMRMToken.
* :mod:`.digest_md5` and :mod:`.ipc` speak Hadoop IPC with SASL token authentication,
  which the RM's scheduler port and every NodeManager demand even with security off;
  :mod:`.proto` holds the YARN messages (YARN's field numbers) and their stubs.
* :mod:`.am_entry` is the smallest AM: register, one allocate, finish.
* :mod:`.client` is the :class:`~gangmaster.protocol.rm_client.RMClient` on YARN (what it bridges
  where YARN differs from gangmaster's RM: its docstring); :mod:`.ids` YARN's ids.
* :mod:`.target` says which cluster ``--rm yarn`` talks to and what gangmaster knows of its nodes.
* :mod:`.am_container` runs the AM in its YARN container; :mod:`.runs` and :mod:`.cli_run`
  are ``gangmaster run --rm yarn``: submit, follow, report.
"""
