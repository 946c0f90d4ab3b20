"""``--report DIR``: checked before the replay (a bad folder costs no work), written whole
or recognisably not (an interrupted write leaves no report that looks complete, and never
a mix of two runs), and a reused folder left with this run's report only (the user's other
files kept)."""
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gangmaster.tools.cli import main
from gangmaster.tools.replay import report
from gangmaster.tools.replay.report import INCOMPLETE, REPORT_FILES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
REPLAY = ["replay", str(FIXTURES / "tiresias_small.csv"), "--nodes", "4", "--gpus-per-node", "4"]

pytestmark = pytest.mark.usefixtures("without_figures")   # the folder's handling, not what is drawn in it


def a_file(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("the user's\n")
    return tmp_path / "file"


@pytest.mark.parametrize("folder, message", [
    (lambda tmp: a_file(tmp), "file: expected a folder for the report (it is a file)"),
    (lambda tmp: a_file(tmp) / "x", "file/x: expected a folder the report can be written to (cannot make it: "
                                     "Not a directory)"),
    (lambda tmp: Path("/proc/x"), "/proc/x: expected a folder the report can be written to (cannot make it: "
                                  "No such file or directory)"),
    # a folder that exists and takes no file (for root too)
    (lambda tmp: Path("/proc"), "/proc: expected a folder the report can be written to (cannot write in it: "),
])
def test_a_folder_the_report_cannot_go_to_exits_2_before_anything_is_replayed(tmp_path, capsys, folder, message):
    assert main([*REPLAY, "--report", str(folder(tmp_path))]) == 2
    out, err = capsys.readouterr()
    assert message in err and len(err.splitlines()) == 1
    assert out == ""   # not a line of the replay: no trace read, no table printed


def without_write_permission() -> list[str]:
    """A command prefix that runs without the right to write where its user may not (root
    keeps it through CAP_DAC_OVERRIDE: setpriv drops that)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to drop root's CAP_DAC_OVERRIDE")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


def test_an_existing_folder_without_write_permission_exits_2_before_the_replay(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir()
    if os.geteuid() == 0:
        os.chown(folder, 65534, 65534)   # nobody's; 0755
    else:
        folder.chmod(0o555)
    done = subprocess.run([*without_write_permission(), sys.executable, "-m", "gangmaster.tools.cli", *REPLAY,
                           "--report", str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"gangmaster: {folder}: expected a folder the report can be written to "
                           "(cannot write in it: Permission denied)\n")
    assert done.stdout == ""


def test_a_reused_folder_keeps_the_users_files_and_loses_the_earlier_reports_other_files(tmp_path, capsys):
    folder = tmp_path / "report"
    folder.mkdir()
    for name in ("sweep.png", "metrics.json", INCOMPLETE):   # an earlier report's, with a --capacity-sweep
        (folder / name).write_text("earlier\n")
    (folder / "notes.txt").write_text("the user's\n")
    (folder / "sweep.png.txt").write_text("the user's too\n")
    assert main([*REPLAY, "--report", str(folder)]) == 0
    out = capsys.readouterr().out
    left = {p.name for p in folder.iterdir()}
    assert {"sweep.png", INCOMPLETE}.isdisjoint(left) and {"notes.txt", "sweep.png.txt"} <= left
    assert left - {"notes.txt", "sweep.png.txt"} <= set(REPORT_FILES)
    assert (folder / "metrics.json").read_text() != "earlier\n"
    assert (f"replaced the earlier report in {folder}; removed its sweep.png, which this run does not write"
            in out)


def test_a_first_report_says_nothing_of_an_earlier_one(tmp_path, capsys):
    assert main([*REPLAY, "--report", str(tmp_path / "new")]) == 0
    assert "replaced" not in capsys.readouterr().out


def earlier_report(folder: Path) -> dict[str, bytes]:
    assert main([*REPLAY, "--capacity-sweep", "3", "--report", str(folder)]) == 0
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_ctrl_c_while_the_report_is_written_leaves_the_earlier_report_whole(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "report"
    before = earlier_report(folder)
    capsys.readouterr()

    def interrupted(comparison, path):
        path.write_text("selector,seed\n")   # half of it
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "write_timeline_csv", interrupted)
    assert main([*REPLAY, "--report", str(folder)]) == 130
    err = capsys.readouterr().err
    assert err == f"gangmaster replay: interrupted; {folder} holds this run's whole report or none of it\n"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before   # not a file of this run, nothing hidden


def test_a_failure_while_the_files_are_moved_into_place_leaves_the_folder_marked_incomplete(tmp_path, monkeypatch):
    """What a kill between two moves leaves: INCOMPLETE says so, whatever the mix."""
    folder = tmp_path / "report"
    earlier_report(folder)
    moved = []

    def replace(source, target):
        if len(moved) == 2:
            raise OSError(28, "No space left on device")
        moved.append(target)
        os.rename(source, target)

    monkeypatch.setattr(report.os, "replace", replace)
    with pytest.raises(OSError):
        main([*REPLAY, "--report", str(folder)])
    assert (folder / INCOMPLETE).read_text().startswith("gangmaster replay stopped while it moved")
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]


def test_ctrl_c_during_the_moves_is_held_until_they_are_done():
    # Python's own handler, as in a terminal (a run started in the background by a
    # non-interactive shell inherits SIGINT ignored); the process's own put back after
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with report._sigint_held():
                os.kill(os.getpid(), signal.SIGINT)
                done.append("after the signal")
        assert done == ["after the signal"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def a_dead_process_id() -> int:
    """The id of a process that has ended (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_partial_folders_of_killed_runs_are_removed_and_said_those_of_live_ones_kept(tmp_path, capsys):
    folder = tmp_path / "report"
    folder.mkdir()
    dead = folder / f".report-partial-{a_dead_process_id()}-abcd1234"   # a SIGKILL'd run's
    live = folder / f".report-partial-{os.getppid()}-efgh5678"          # a run writing now
    unknown = folder / ".report-partial-xyz"                            # no process id: whose is unknown
    for partial in (dead, live, unknown):
        partial.mkdir()
        (partial / "jobs.csv").write_text("selector,seed\n")
    assert main([*REPLAY, "--report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert {p.name for p in folder.iterdir() if p.name.startswith(".")} == {live.name, unknown.name}
    assert (f"  removed {dead.name}: left in {folder} by earlier runs that were killed while writing "
            "(their processes are gone)") in out.splitlines()


@pytest.mark.parametrize("earlier, said", [
    ({"metrics.json": "earlier\n", INCOMPLETE: "stopped\n"},
     "  replaced the earlier report in {folder}; it was incomplete (its INCOMPLETE said a run stopped while "
     "moving its files in)"),
    ({INCOMPLETE: "stopped\n"},    # killed before its first file was moved in
     "  replaced the earlier report in {folder}; it was incomplete (its INCOMPLETE said a run stopped while "
     "moving its files in)"),
    ({"metrics.json": "earlier\n"}, "  replaced the earlier report in {folder}"),
])
def test_an_incomplete_earlier_report_is_said_to_be_so_when_replaced(tmp_path, capsys, earlier, said):
    folder = tmp_path / "report"
    folder.mkdir()
    for name, text in earlier.items():
        (folder / name).write_text(text)
    assert main([*REPLAY, "--report", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if "replaced" in line] == [said.format(folder=folder)]
    assert not (folder / INCOMPLETE).exists()
