"""``gangmaster select --workload FILE``: the workload reaches the strategy through its hook;
fgd without one, or with a bad file, is bad input (exit 2) with a message that says what to give."""
from gangmaster.tools.cli import main

WORKLOAD = """shapes:
  - {vcores: 1, memoryMB: 1024, gpus: 1, weight: 3}
  - {vcores: 8, memoryMB: 1024, gpus: 4, weight: 1}
"""


def test_fgd_selects_with_a_workload_file(tmp_path, capsys):
    path = tmp_path / "workload.yaml"
    path.write_text(WORKLOAD)
    assert main(["select", "--selector", "fgd", "--gpus", "1", "--workload", str(path)]) == 0
    assert "selector: fgd" in capsys.readouterr().out


def test_fgd_without_a_workload_says_what_to_give(capsys):
    assert main(["select", "--selector", "fgd", "--gpus", "1"]) == 2
    assert "needs the workload's typical task shapes: give --workload FILE" in capsys.readouterr().err


def test_a_bad_workload_file_names_the_file_and_field(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("shapes:\n  - {vcores: -1}\n")
    assert main(["select", "--selector", "fgd", "--workload", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "shapes[0].vcores" in err
