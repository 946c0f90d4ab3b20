#!/usr/bin/env bash
# Regenerate the checked-in protobuf stubs in tools/yarn/proto/ from tools/yarn/proto/*.proto
# (Hadoop IPC and YARN messages; plain messages, no gRPC services: Hadoop RPC is not gRPC).
#
# Needs the dev extra (grpcio-tools pinned to the runtime's protobuf, see setup.cfg):
#   pip install -e ".[dev]" && tools/yarn/gen_protos.sh
# The stubs are generated under a temporary gangmaster/tools/yarn/proto/ tree so that their
# imports read `from gangmaster.tools.yarn.proto import x_pb2`, then copied back.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/gangmaster/tools/yarn/proto"
cp "$here"/proto/*.proto "$work/gangmaster/tools/yarn/proto/"
(cd "$work" && python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. gangmaster/tools/yarn/proto/*.proto)
for f in "$work"/gangmaster/tools/yarn/proto/*_pb2.py*; do
  cp "$f" "$here/proto/"
done
echo "regenerated: $(cd "$here/proto" && ls *_pb2.py | tr '\n' ' ')"
