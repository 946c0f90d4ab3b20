"""Apache Hadoop YARN as the ResourceManager behind the AM (a tool-level integration, in progress).

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
"""
