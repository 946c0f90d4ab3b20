"""The checked-in RM stubs are what tools/gen_protos.sh makes from protocol/proto/rm.proto
with the pinned grpcio-tools (so an edit to the .proto without regenerating fails here)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_rm_stubs_are_regenerated_from_the_proto(tmp_path):
    pytest.importorskip("grpc_tools", reason="needs the dev extra (grpcio-tools)")
    out = tmp_path / "gangmaster" / "protocol" / "proto"
    out.mkdir(parents=True)
    shutil.copy(ROOT / "protocol" / "proto" / "rm.proto", out)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", "--pyi_out=.",
                    "--grpc_python_out=.", "gangmaster/protocol/proto/rm.proto"], cwd=tmp_path, check=True, timeout=60)
    for name in ("rm_pb2.py", "rm_pb2.pyi", "rm_pb2_grpc.py"):
        assert (out / name).read_text() == (ROOT / "protocol" / "proto" / name).read_text(), f"{name} is stale: run tools/gen_protos.sh"
