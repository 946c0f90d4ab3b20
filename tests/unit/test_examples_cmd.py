"""`gangmaster examples`: the examples installed with the package, listed and copied, for a
user with the wheel and no checkout (.ci/run runs it from an installed wheel as well)."""
import pytest

from gangmaster.conf import CONF_DIR
from gangmaster.tools.cli import main
from gangmaster.tools.examples_cmd import FOLDERS, example_files


def test_lists_every_example_with_the_folder_it_is_in(capsys):
    assert main(["examples"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"installed in {CONF_DIR}:")
    for relative in ("jobs/mpi-allreduce.yaml", "clusters/default.yaml", "topologies/dgx1-v100.yaml"):
        assert f"  {relative}\n" in out


def test_every_example_folder_is_listed():
    assert {f.parts[0] for f in example_files()} == set(FOLDERS)


def test_copy_makes_the_readme_paths_and_the_copied_job_is_valid(tmp_path, capsys):
    target = tmp_path / "conf"
    assert main(["examples", "--copy", str(target)]) == 0
    for relative in example_files():
        assert (target / relative).read_bytes() == (CONF_DIR / relative).read_bytes()
    assert main(["validate", str(target / "jobs" / "mpi-allreduce.yaml")]) == 0


@pytest.mark.parametrize("case", ["second copy", "a file"])
def test_copy_refuses_to_overwrite_in_one_line(tmp_path, capsys, case):
    target = tmp_path / "conf"
    if case == "second copy":
        assert main(["examples", "--copy", str(target)]) == 0
        (target / "jobs" / "mpi-allreduce.yaml").write_text("# edited\n")
    else:
        target.write_text("not a folder\n")
    capsys.readouterr()
    assert main(["examples", "--copy", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gangmaster: --copy: expected ") and err.count("\n") == 1
    if case == "second copy":
        assert (target / "jobs" / "mpi-allreduce.yaml").read_text() == "# edited\n"
