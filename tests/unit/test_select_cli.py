import json

import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.cli import main


def test_select_prints_choice_and_explanation(capsys):
    assert main(["select", "--gpus", "2", "--ports", "2", "--gpu-type", "V100"]) == 0
    out = capsys.readouterr().out
    assert "dgx1-" in out and "ports: 20000-20001" in out
    assert "4/12 nodes fit role worker: 8 of another GPU type (want V100)" in out


def test_select_json_and_not_available(capsys):
    assert main(["select", "--gpus", "9", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    assert doc["explanation"]["rejections"][0] == {
        "filter": "resource-fit", "reason": "gpus", "kind": "filtered", "count": 12, "requested": 9, "capacity": 8}


def test_select_a_share_names_the_gpu_and_the_share(capsys):
    assert main(["select", "--gpu-milli", "500", "--gpu-type", "V100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["resource"] == "memory=1024MB vcores=1 gpu_milli=500"
    best = doc["candidates"][0]
    assert best["gpu_milli"] == 500 and best["gpus"] == [best["gpu"]] and best["gpu_mask"] == 1 << best["gpu"]
    assert best["gpu_milli_free"] == [1000] * 8           # a DGX-1, all free before the share
    assert main(["select", "--gpu-milli", "250", "--gpu-indices", "3"]) == 0
    out = capsys.readouterr().out
    assert "gpu_milli=250@gpu3" in out and "gpu=3 share=250 milli (of 1000 free" in out
    assert "nodes fit role worker: 4 without a GPU to share (need 250 milli)" in out


@pytest.mark.parametrize("argv, message", [
    (["--gpu-milli", "1000"], "expected an integer 1..999, got 1000"),
    (["--gpu-milli", "0"], "expected an integer 1..999, got 0"),
    (["--gpu-milli", "300", "--gpus", "1"], "a share of one GPU and whole GPUs cannot be asked together"),
    (["--gpu-milli", "300", "--gpu-indices", "1,2"], "a share sits on one GPU"),
])
def test_bad_share_asks_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["select", *argv]))
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_selectors_lists_every_strategy(capsys):
    assert main(["selectors"]) == 0
    out = capsys.readouterr().out
    for name in ("job-packing", "locality", "random", "emptiest-first"):
        assert name in out


def test_unknown_selector_exits_with_the_list(capsys):
    assert main(["select", "--selector", "nope"]) == 2
    assert "known selectors" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--gpu-indices", "99"], "GPU index 99 is beyond the 64-GPU limit"),
    (["--gpu-indices", "0,x"], "--gpu-indices: expected GPU indices like 0,1, got '0,x'"),
    (["--gpu-indices", "1,1"], "GPU index 1 is listed twice"),
    (["--gpu-indices", "-1"], "GPU index must be an integer >= 0"),
    (["--vcores", "nan"], "vcores: expected a finite number >= 0, got nan"),
    (["--vcores", "inf"], "vcores: expected a finite number >= 0, got inf"),
])
def test_bad_requests_exit_2_with_a_message_not_a_traceback(capsys, argv, message):
    assert main(["select", *argv]) == 2
    assert message in capsys.readouterr().err


def test_help_shows_each_default_once(capsys):
    with pytest.raises(SystemExit):
        main(["select", "--help"])
    out = capsys.readouterr().out
    assert "(default: None)" not in out
    assert out.count("(default: 1024)") == 1


def test_settings_override_and_errors(tmp_path):
    good = tmp_path / "s.yaml"
    good.write_text("selection:\n  candidate_nodes_factor: 3\n")
    assert SelectionSettings.load(str(good)).candidate_nodes_factor == 3
    assert SelectionSettings.load(str(good)).selector == "job-packing"  # the rest from defaults
    for text, message in [
        ("selection:\n  candidate_nodes_factr: 3\n", "selection.candidate_nodes_factr: expected no such field"),
        ("selection:\n  rack_policy: tight\n", 'selection.rack_policy: expected one of none, pack, spread, got "tight"'),
        ("selekshun: {}\n", "selekshun: expected no such field"),
    ]:
        good.write_text(text)
        with pytest.raises(ConfigError) as err:
            SelectionSettings.load(str(good))
        assert str(good) in str(err.value) and message in str(err.value)
