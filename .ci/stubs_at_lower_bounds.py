"""Run by .ci/run in a venv holding the wheel and exactly the lowest grpcio and protobuf
that pyproject.toml declares: the checked-in stubs import there (their own version checks
pass), a message round-trips, and one call crosses a real gRPC channel."""
import os
import sys
from concurrent import futures
from importlib import import_module, metadata

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # (not the INFO line of the server's goodbye)
import grpc  # noqa: E402

STUBS = ("gangmaster.protocol.proto.rm_pb2", "gangmaster.protocol.proto.rm_pb2_grpc", "gangmaster.protocol.proto.barrier_pb2",
         "gangmaster.protocol.proto.barrier_pb2_grpc", "gangmaster.tools.rmsim.proto.rmsim_pb2",
         "gangmaster.tools.rmsim.proto.rmsim_pb2_grpc", "gangmaster.tools.yarn.proto.hadoop_common_pb2",
         "gangmaster.tools.yarn.proto.yarn_pb2")


def main() -> int:
    for name in STUBS:
        import_module(name)
    from gangmaster.protocol.proto import rm_pb2, rm_pb2_grpc

    asked = rm_pb2.ResourceRequest(request_id=7, count=2, host="dgx1-001")
    assert rm_pb2.ResourceRequest.FromString(asked.SerializeToString()) == asked

    class Answering(rm_pb2_grpc.ResourceManagerServicer):
        def Kill(self, request, context):
            return rm_pb2.Empty()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    rm_pb2_grpc.add_ResourceManagerServicer_to_server(Answering(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            rm_pb2_grpc.ResourceManagerStub(channel).Kill(rm_pb2.KillRequest(app_id="app_0001"), timeout=10)
    finally:
        server.stop(None)
    print(f"ci: the stubs work on grpcio {metadata.version('grpcio')}, protobuf {metadata.version('protobuf')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
