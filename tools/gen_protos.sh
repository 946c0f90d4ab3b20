#!/usr/bin/env bash
# Regenerate the checked-in protobuf/gRPC stubs in am/proto/ from am/proto/*.proto.
#
# Needs the dev extra (grpcio-tools pinned to the same grpcio as the runtime):
#   pip install -e ".[dev]" && tools/gen_protos.sh
# The stubs are generated under a temporary gangmaster/am/proto/ tree so that their
# imports read `from gangmaster.am.proto import x_pb2`, then copied back.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/gangmaster/am/proto"
cp "$root"/am/proto/*.proto "$work/gangmaster/am/proto/"
(cd "$work" && python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. gangmaster/am/proto/*.proto)
for f in "$work"/gangmaster/am/proto/*_pb2*.py*; do
  cp "$f" "$root/am/proto/"
done
echo "regenerated: $(cd "$root/am/proto" && ls *_pb2*.py | tr '\n' ' ')"
