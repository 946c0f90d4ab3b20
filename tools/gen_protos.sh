#!/usr/bin/env bash
# Regenerate the checked-in protobuf/gRPC stubs in protocol/proto/ from protocol/proto/*.proto.
#
# Needs the dev extra (grpcio-tools pinned to the same grpcio as the runtime):
#   pip install -e ".[dev]" && tools/gen_protos.sh
# The stubs are generated under a temporary gangmaster/protocol/proto/ tree so that their
# imports read `from gangmaster.protocol.proto import x_pb2`, then copied back.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/gangmaster/protocol/proto"
cp "$root"/protocol/proto/*.proto "$work/gangmaster/protocol/proto/"
(cd "$work" && python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. gangmaster/protocol/proto/*.proto)
for f in "$work"/gangmaster/protocol/proto/*_pb2*.py*; do
  cp "$f" "$root/protocol/proto/"
done
echo "regenerated: $(cd "$root/protocol/proto" && ls *_pb2*.py | tr '\n' ' ')"
