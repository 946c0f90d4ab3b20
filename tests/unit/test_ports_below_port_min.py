"""Issue 11: a cluster whose free ports all sit below ``selection.port_min`` passed the
filter and then crashed the port chooser with a PortError traceback. The fit model
counts only ports >= port_min, so such a node is rejected by the filter, with reason
``ports``, and both commands fail the way any request that cannot fit does."""
import json

import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.cli import main

CLUSTER = """\
name: low-ports
nodeGroups:
  - name: dgx
    count: 2
    rack: rack-a
    gpuType: V100
    memoryMB: 65536
    vcores: 16
    gpus: 8
    ports: "1000-1099"
"""

JOB = """\
protocolVersion: 2
name: ports-job
type: job
taskRoles:
  worker:
    instances: 2
    resourcePerInstance: {cpu: 4, memoryMB: 8192, gpu: 1, ports: {nccl: 1}}
    commands:
      - echo hi
"""


@pytest.fixture
def files(tmp_path):
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "job.yaml").write_text(JOB)
    return tmp_path


def test_the_filter_rejects_nodes_whose_free_ports_sit_below_port_min():
    low, high = PortRanges.of((1000, 1009)), PortRanges.of((1000, 1009), (20000, 20001))
    view = ClusterView([NodeSpec("low", memory_mb=1000, vcores=4, ports=low),
                        NodeSpec("high", memory_mb=1000, vcores=4, ports=high)])
    pipeline = SelectionPipeline(SelectionSettings(port_min=20000))
    result = pipeline.select_single_node(view, SelectionRequest("worker", R(ports=2)))
    assert result.best.host == "high" and str(result.ports) == "20000-20001"
    assert result.explanation.count("ports") == 1
    with pytest.raises(NotAvailable, match=r"0/2 nodes fit role worker: 2 ports exhausted \(need 3, most free 2\)"):
        pipeline.select_single_node(view, SelectionRequest("worker", R(ports=3)))
    assert SelectionPipeline(SelectionSettings(port_min=0)).select_single_node(
        view, SelectionRequest("worker", R(ports=3))).best.host in ("low", "high")


def test_select_names_ports_and_exits_1(files, capsys):
    assert main(["select", "--ports", "1", "--cluster", str(files / "cluster.yaml"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["explanation"]["rejections"] == [{
        "filter": "resource-fit", "reason": "ports", "kind": "exhausted", "count": 2, "requested": 1,
        "most_free": 0}]


def test_run_fails_the_job_naming_ports_without_a_traceback(files, capsys):
    rc = main(["run", str(files / "job.yaml"), "--cluster", str(files / "cluster.yaml"),
               "--work-dir", str(files / "work"), "--quiet"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "Traceback" not in out + err and "PortError" not in out + err
    assert "gang worker can never run on this cluster" in out
    assert "2 ports exhausted (need 1, most free 0)" in out
