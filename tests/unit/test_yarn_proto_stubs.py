"""tools/yarn/proto/*.proto against what Hadoop really speaks, and the stubs against the .proto files.

The reference is the FileDescriptorProto of Hadoop 3.4.2's own generated classes, dumped
from its jars (tests/fixtures/yarn/hadoop-3.4.2-descriptors/, made by DumpDescriptors.java
there): every message and enum declared here must exist there, each field with the same
number, name, type and label. (Copies of RpcHeader.proto from before Hadoop 3 declare the
request's callId uint32; the 3.4 RM reads it as sint32, and a handshake sent that way fails.)
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from gangmaster.tools.yarn.proto import hadoop_common_pb2, yarn_pb2

ROOT = Path(__file__).resolve().parents[2]
HADOOP = ROOT / "tests" / "fixtures" / "yarn" / "hadoop-3.4.2-descriptors"


def _types(files) -> dict[str, object]:
    """Every message and enum of ``files`` (FileDescriptorProtos) by full name, nested ones included."""
    types: dict[str, object] = {}

    def walk(prefix, messages, enums):
        for e in enums:
            types[f"{prefix}.{e.name}"] = e
        for m in messages:
            types[f"{prefix}.{m.name}"] = m
            walk(f"{prefix}.{m.name}", m.nested_type, m.enum_type)

    for file in files:
        walk(file.package, file.message_type, file.enum_type)
    return types


def _ours(module) -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(file)
    return file


HADOOP_TYPES = _types(descriptor_pb2.FileDescriptorProto.FromString(p.read_bytes()) for p in HADOOP.glob("*.pb"))
OUR_TYPES = _types(_ours(module) for module in (hadoop_common_pb2, yarn_pb2))


@pytest.mark.parametrize("name", sorted(OUR_TYPES))
def test_declared_as_hadoop_declares_it(name):
    ours, theirs = OUR_TYPES[name], HADOOP_TYPES.get(name)
    assert theirs is not None, f"{name} is not one of Hadoop 3.4.2's messages or enums"
    if isinstance(ours, descriptor_pb2.EnumDescriptorProto):
        hadoop_values = {v.name: v.number for v in theirs.value}
        assert {v.name: v.number for v in ours.value}.items() <= hadoop_values.items()
        return
    by_number = {f.number: f for f in theirs.field}
    for field in ours.field:
        hadoop = by_number.get(field.number)
        assert hadoop is not None, f"{name}: Hadoop has no field {field.number} ({field.name})"
        assert (field.name, field.type, field.label, field.type_name) == (
            hadoop.name, hadoop.type, hadoop.label, hadoop.type_name), f"{name}.{field.name}"


def test_the_request_call_id_is_sint32():
    call_id = hadoop_common_pb2.RpcRequestHeaderProto.DESCRIPTOR.fields_by_name["callId"]
    assert call_id.type == call_id.TYPE_SINT32


def test_stubs_are_regenerated_from_the_protos(tmp_path):
    pytest.importorskip("grpc_tools", reason="needs the dev extra (grpcio-tools)")
    out = tmp_path / "gangmaster" / "tools" / "yarn" / "proto"
    out.mkdir(parents=True)
    protos = sorted((ROOT / "tools" / "yarn" / "proto").glob("*.proto"))
    for proto in protos:
        shutil.copy(proto, out)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", "--pyi_out=.",
                    *(f"gangmaster/tools/yarn/proto/{p.name}" for p in protos)], cwd=tmp_path, check=True, timeout=60)
    for proto in protos:
        for suffix in ("_pb2.py", "_pb2.pyi"):
            name = proto.stem + suffix
            assert (out / name).read_text() == (ROOT / "tools" / "yarn" / "proto" / name).read_text(), \
                f"{name} is stale: run tools/yarn/gen_protos.sh"
