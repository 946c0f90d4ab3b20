"""`gangmaster topo`: the matrix, the cliques, the choice, JSON, and clear errors."""
import json
from pathlib import Path

import pynvml
import pytest

from gangmaster.tools.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topo"


@pytest.fixture
def no_driver(monkeypatch):
    def fail():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setattr(pynvml, "nvmlInit", fail)


def test_preset_matrix_cliques_and_choice(capsys):
    assert main(["topo", "--preset", "dgx1-v100", "--request", "2", "--free", "0,2,3,5,6"]) == 0
    out = capsys.readouterr().out
    assert "GPU0    X     NV1   NV1   NV2   NV2   SYS" in out
    assert "[0, 1, 2, 3]  (4 GPUs" in out and "[4, 5, 6, 7]" in out
    assert "topology strategy: [5, 6]  score 120  all NVLink: yes" in out
    assert "lowest free bits:  [0, 2]  score 110" in out


def test_from_file_json(capsys):
    path = FIXTURES / "topo_dgx_a100.txt"
    assert main(["topo", "--from-file", str(path), "--request", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpus"] == 8 and doc["matrix"][0][1] == "NV12" and len(doc["nics"]) == 12
    assert doc["nvlink_cliques"] == [list(range(8))]
    assert doc["request"]["chosen"] == [0, 1, 2] and doc["request"]["score"] == 3 * 220


def test_no_driver_falls_back_to_the_configured_preset(capsys, no_driver):
    assert main(["topo", "--json"]) == 0
    captured = capsys.readouterr()
    assert "NVML unavailable" in captured.err and "'dgx1-v100'" in captured.err
    assert json.loads(captured.out)["name"] == "dgx1-v100"
    assert main(["topo", "--fallback-preset", "pcie-4gpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "pcie-4gpu"


def test_list_presets(capsys):
    assert main(["topo", "--list-presets"]) == 0
    out = capsys.readouterr().out
    assert "dgx-h100" in out and "k80-8gpu" in out and "16 GPUs" in out


@pytest.mark.parametrize("argv, message", [
    (["--preset", "nope"], "unknown topology preset 'nope'"),
    (["--preset", "pcie-4gpu", "--request", "5"], "--request: expected 1..4 GPUs"),
    (["--preset", "pcie-4gpu", "--request", "2", "--free", "0,9"], "GPU(s) [9] are not on this 4-GPU node"),
    (["--preset", "pcie-4gpu", "--request", "2", "--free", "a,b"], "--free: expected comma-separated"),
    (["--preset", "pcie-4gpu", "--free", "0"], "--free needs --request N"),
])
def test_errors_exit_2_with_a_message(capsys, argv, message):
    assert main(["topo"] + argv) == 2
    assert message in capsys.readouterr().err


def test_bad_file_names_the_line(tmp_path, capsys):
    path = tmp_path / "topo.txt"
    path.write_text("\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU1\tNV1\n")
    assert main(["topo", "--from-file", str(path)]) == 2
    assert f"{path}: line 3: expected 2 link cells" in capsys.readouterr().err


def test_too_few_free_gpus_exits_1(capsys):
    assert main(["topo", "--preset", "pcie-4gpu", "--request", "3", "--free", "0,1"]) == 1
    assert "cannot be served: only 2 GPU(s) free, 3 requested" in capsys.readouterr().out


def test_config_override_without_fallback_is_a_clear_error(tmp_path, capsys, no_driver):
    config = tmp_path / "settings.yaml"
    config.write_text("topology:\n  fallback_preset: null\n")
    assert main(["topo", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "NVML unavailable" in err and "no fallback preset is configured" in err and "--preset NAME" in err
    config.write_text("topology:\n  fallback_preset: pcie-4gpu\n")
    assert main(["topo", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "pcie-4gpu"


def test_config_with_unknown_knob_names_file_and_field(tmp_path, capsys, no_driver):
    config = tmp_path / "settings.yaml"
    config.write_text("topology:\n  fallback: pcie-4gpu\n")
    assert main(["topo", "--config", str(config)]) == 2
    assert f"{config}: topology.fallback: expected no such field" in capsys.readouterr().err
