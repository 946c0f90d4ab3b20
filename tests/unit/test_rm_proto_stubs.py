"""The checked-in RM stubs are what tools/gen_protos.sh makes from their .proto files (the
protocol's, protocol/proto/rm.proto, and the RM simulator's own service,
tools/rmsim/proto/rmsim.proto) with the pinned grpcio-tools (so an edit to a .proto
without regenerating fails here)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("folder, name", [("protocol/proto", "rm"), ("tools/rmsim/proto", "rmsim")])
def test_rm_stubs_are_regenerated_from_the_proto(tmp_path, folder, name):
    pytest.importorskip("grpc_tools", reason="needs the dev extra (grpcio-tools)")
    out = tmp_path / "gangmaster" / folder
    out.mkdir(parents=True)
    shutil.copy(ROOT / folder / f"{name}.proto", out)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", "--pyi_out=.",
                    "--grpc_python_out=.", f"gangmaster/{folder}/{name}.proto"], cwd=tmp_path, check=True, timeout=60)
    for stub in (f"{name}_pb2.py", f"{name}_pb2.pyi", f"{name}_pb2_grpc.py"):
        assert (out / stub).read_text() == (ROOT / folder / stub).read_text(), f"{stub} is stale: run tools/gen_protos.sh"
