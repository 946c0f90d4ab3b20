"""`gangmaster run --rm slurm`'s pass-through options (--account, --qos, --time) as sbatch
gets them, refused with exit 2 when Slurm would not take them, and the dry run's print."""
from argparse import Namespace
from pathlib import Path

import pytest

from gangmaster.tools.slurm.cli_run import render_dry_run, sbatch_options


@pytest.mark.parametrize("given, options, bad", [
    ({}, [], ""),
    ({"account": "proj-7", "qos": "high", "time": "90"}, ["--account=proj-7", "--qos=high", "--time=90"], ""),
    ({"time": "1:30:00"}, ["--time=1:30:00"], ""),
    ({"time": "2-12"}, ["--time=2-12"], ""),
    ({"time": "2-12:30:00"}, ["--time=2-12:30:00"], ""),
    ({"time": "unlimited"}, ["--time=unlimited"], ""),
    ({"time": "1h"}, [], "--time: expected a Slurm time limit (minutes, H:M:S, D-H:M:S or UNLIMITED), got '1h'"),
    ({"time": "1:2:3:4"}, [], "--time: expected a Slurm time limit"),
    ({"account": "a b"}, [], "--account: expected a Slurm account name (letters, digits, - _ .), got 'a b'"),
    ({"qos": "x;rm"}, [], "--qos: expected a Slurm QOS name"),
])
def test_sbatch_options(given, options, bad):
    args = Namespace(**{"account": None, "qos": None, "time": None, **given})
    got, said = sbatch_options(args)
    assert got == options and said.startswith(bad) and bool(said) == bool(bad)


@pytest.mark.parametrize("flags", [["--account", "p"], ["--qos", "q"], ["--time", "10"], ["--dry-run"],
                                   ["--partition", "gpu"]])
def test_slurm_options_without_slurm_are_refused(tmp_path, capsys, flags):
    from gangmaster.tools.cli import main
    job = Path(__file__).resolve().parents[2] / "conf" / "jobs" / "gang.yaml"
    if not job.is_file():
        job = next((Path(__file__).resolve().parents[2] / "conf" / "jobs").glob("*.yaml"))
    assert main(["run", str(job), *flags, "--rm", "sim", "--work-dir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert f"gangmaster run: {flags[0]} is a Slurm option: it needs --rm slurm" in err
    assert not (tmp_path / "w").exists()


class FakeClient:
    def __init__(self, folder: Path):
        self.state_dir = folder / "slurm"
        self.state_dir.mkdir(parents=True)
        (self.state_dir / "launcher.sh").write_text("#!/bin/sh\nexec python -m gangmaster.tools.slurm.launcher \"$1\"\n")


def test_the_dry_run_prints_each_component_on_its_line_with_the_work_folders_paths(tmp_path):
    scratch = tmp_path / "scratch"
    client = FakeClient(scratch)
    folder = f"{scratch}/slurm/apps/app_0001/gm-app_0001-1"
    command = ["sbatch", "--parsable", "--job-name=gm-app_0001-1", f"--output={folder}/launcher.log",
               "--time=10", "-N1", "--nodelist=node-1", ":", "-N1", "--nodelist=node-2",
               f"{scratch}/slurm/launcher.sh", folder]
    text = render_dry_run([command], str(scratch), "runs/gang-1", client)
    assert str(scratch) not in text
    assert text.splitlines() == [
        "# --dry-run: nothing submitted; 1 sbatch command(s) a run into runs/gang-1 would run",
        "# gm-app_0001-1: a heterogeneous job of 2 component(s), one per host",
        "sbatch --parsable --job-name=gm-app_0001-1 --output=runs/gang-1/slurm/apps/app_0001/gm-app_0001-1/launcher.log"
        " --time=10 -N1 --nodelist=node-1 \\",
        "    : -N1 --nodelist=node-2 \\",
        "    runs/gang-1/slurm/launcher.sh runs/gang-1/slurm/apps/app_0001/gm-app_0001-1",
        "# the job script, runs/gang-1/slurm/launcher.sh (the batch step: it starts each task as a step):",
        "#!/bin/sh",
        "exec python -m gangmaster.tools.slurm.launcher \"$1\"",
    ]


def test_several_slurm_options_without_slurm_are_named_together(tmp_path, capsys):
    from gangmaster.tools.cli import main
    job = next((Path(__file__).resolve().parents[2] / "conf" / "jobs").glob("*.yaml"))
    assert main(["run", str(job), "--qos", "q", "--time", "5", "--work-dir", str(tmp_path / "w")]) == 2
    assert "gangmaster run: --qos, --time are Slurm options: they need --rm slurm" in capsys.readouterr().err
