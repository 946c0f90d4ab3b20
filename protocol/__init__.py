"""The AM–RM protocol, below both of them as YARN keeps its API below the AM and the RM.

What crosses the boundary between an ApplicationMaster and a ResourceManager: the messages
(:mod:`.rm_protocol`, the source of truth), their form checks (:mod:`.rm_validation`), the
wire codec (:mod:`.rm_codec`) and generated stubs (:mod:`.proto`), the client interface the
AM talks through (:mod:`.rm_client`) and its gRPC implementation (:mod:`.rm_client_grpc`),
and the gRPC security both servers share (:mod:`.grpc_security`, with the private files and
the refusal log it uses). It imports nothing of ``am/`` or ``tools/``: the AM and the RM
simulator (``tools/rmsim``) both stand on it (tests/unit/test_layering.py).
"""
