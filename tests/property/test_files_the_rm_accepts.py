"""What a cluster or queue file may say, the RM accepts: a name the readers let through
reaches the RM intact (a 300-character queue name passed the queue reader, then crashed
`gangmaster run` with the RM's InvalidRequest)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from gangmaster.protocol.rm_client import InProcessRMClient
from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ResourceRequest
from gangmaster.conf.fields import ConfigError
from gangmaster.conf.limits import MAX_NAME_CHARS
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.tools.rmsim.core import ResourceManager
from gangmaster.tools.rmsim.ledger import NodeLedger
from gangmaster.tools.rmsim.queues import load_queues

NAMES = st.one_of(
    st.text(min_size=0, max_size=12),
    st.text(alphabet="abc-_.:/", min_size=MAX_NAME_CHARS - 4, max_size=MAX_NAME_CHARS + 4),
    st.sampled_from(["a b", "x\x00", "tab\there", "ü中", "-", "é" * MAX_NAME_CHARS]),
)


def _read(tmp_path, host, rack, label, queue):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(json.dumps({"nodeGroups": [{"name": "g", "hosts": [host], "rack": rack, "labels": [label],
                                                   "vcores": 8, "memoryMB": 8192}]}))   # JSON is YAML
    queues = tmp_path / "queues.yaml"
    queues.write_text(json.dumps({"queues": [{"name": queue, "machines": 1}]}))
    specs = load_cluster_specs(str(cluster))
    return specs, load_queues(str(queues), NodeLedger(specs))


@given(host=NAMES, rack=NAMES, label=NAMES, queue=NAMES)
def test_names_the_readers_accept_the_rm_accepts(tmp_path_factory, host, rack, label, queue):
    try:
        specs, queues = _read(tmp_path_factory.mktemp("files"), host, rack, label, queue)
    except ConfigError:
        return   # refused with the file and field: fine
    rm = InProcessRMClient(ResourceManager(specs, queues))
    app = rm.submit(ApplicationSubmission("job", queue))
    rm.register(app)
    ask = ResourceRequest(1, ResourceDescriptor(1024, 1), host=host, node_label=label)
    rm.allocate(AllocateRequest(app, 1, asks=(ask,)))   # must not raise InvalidRequest


@pytest.mark.parametrize("field, value", [
    ("host", "h" * (MAX_NAME_CHARS + 1)), ("rack", "r" * (MAX_NAME_CHARS + 1)),
    ("label", "a b"), ("queue", "q" * 300), ("queue", "bad\x01name"),
])
def test_a_name_the_rm_would_refuse_is_refused_in_the_file(tmp_path, field, value):
    names = {"host": "h", "rack": "r", "label": "l", "queue": "q"} | {field: value}
    with pytest.raises(ConfigError, match="MAX_NAME_CHARS"):
        _read(tmp_path, **names)
