#!/usr/bin/env bash
# Regenerate the checked-in protobuf/gRPC stubs from their .proto files: the AM–RM protocol's
# and the barrier's (protocol/proto/) and the RM simulator's own service (tools/rmsim/proto/).
#
# Needs the dev extra (grpcio-tools pinned to the same grpcio as the runtime):
#   pip install -e ".[dev]" && tools/gen_protos.sh
# The stubs are generated under a temporary gangmaster/<folder> tree so that their imports
# read `from gangmaster.protocol.proto import x_pb2`, then copied back.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for folder in protocol/proto tools/rmsim/proto; do
  mkdir -p "$work/gangmaster/$folder"
  cp "$root/$folder"/*.proto "$work/gangmaster/$folder/"
  (cd "$work" && python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. "gangmaster/$folder"/*.proto)
  for f in "$work/gangmaster/$folder"/*_pb2*.py*; do
    cp "$f" "$root/$folder/"
  done
  echo "regenerated in $folder: $(cd "$root/$folder" && ls *_pb2*.py | tr '\n' ' ')"
done
