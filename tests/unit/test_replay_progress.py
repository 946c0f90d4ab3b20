"""The replay's progress bar: what it says, how often it redraws, and that it fits the
terminal (a line as wide as the terminal wraps, and every redraw would scroll a new line)."""
import io

import pytest

from gangmaster.tools.replay.progress import ProgressBar


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def drawn_lines(out: io.StringIO) -> list[str]:
    return out.getvalue().rstrip("\n").split("\r")[1:]


def test_progress_bar_shows_done_total_rate_and_eta_and_redraws_at_most_every_fifth_second():
    out, clock = io.StringIO(), Clock()
    bar = ProgressBar("job-packing seed 0", out, clock=clock, columns=lambda: 120)
    clock.now = 2.0
    bar(100, 1000)
    assert out.getvalue() == "\rjob-packing seed 0 [##..........................] 100/1,000 jobs 50 jobs/s ETA 0:00:18"
    clock.now = 2.1
    bar(150, 1000)                                  # within 0.2 s of the last: not drawn
    assert out.getvalue().count("\r") == 1
    clock.now = 2.15
    bar(1000, 1000)                                 # the end is always drawn
    bar.close()
    assert out.getvalue().count("\r") == 2 and out.getvalue().endswith("0:00:00\n")


# A long label and large counts: the widest line a Philly replay draws (92-95 characters
# before the bar fitted the terminal).
LABEL = "sweep 1,000 nodes: job-packing seed 12"


@pytest.mark.parametrize("columns, has_bar, has_rate", [
    (200, True, True),
    (120, True, True),
    (100, True, True),      # a narrower bar
    (90, False, True),      # the bar gives way first
    (80, False, False),     # then the rate
    (40, False, False),
    (20, False, False),
])
def test_the_line_stays_one_column_short_of_the_terminal(columns, has_bar, has_rate):
    out, clock = io.StringIO(), Clock()
    bar = ProgressBar(LABEL, out, clock=clock, columns=lambda: columns)
    for k, done in enumerate((1, 12_345, 117_325, 117_325)):
        clock.now = 1.0 + k
        bar(done, 117_325)
    bar.close()
    lines = drawn_lines(out)
    assert len(lines) == 4 and all(len(line) <= columns - 1 for line in lines), [len(x) for x in lines]
    assert ("[" in lines[1]) == has_bar and ("jobs/s" in lines[1]) == has_rate
    assert "117,325" in lines[-1] or columns < 20


def test_at_80_columns_a_bar_is_drawn_for_a_short_label():
    out, clock = io.StringIO(), Clock()
    bar = ProgressBar("job-packing seed 0", out, clock=clock, columns=lambda: 80)
    clock.now = 1.0
    bar(12_345, 117_325)
    line = drawn_lines(out)[0]
    assert len(line) <= 79 and "[" in line and "ETA" in line


def test_a_shorter_line_is_drawn_over_the_longer_one_before_it():
    out, clock = io.StringIO(), Clock()
    bar = ProgressBar("x", out, clock=clock, columns=lambda: 100)
    clock.now = 1.0
    bar(1, 10)                     # ETA 0:00:09
    clock.now = 0.0                # rate unknown: ETA ?, a shorter line
    bar.last_drawn = -1.0
    bar(0, 10)
    first, second = drawn_lines(out)
    assert len(second) == len(first) and second.rstrip().endswith("ETA ?")


def test_a_resized_terminal_is_followed():
    out, clock, width = io.StringIO(), Clock(), [120]
    bar = ProgressBar(LABEL, out, clock=clock, columns=lambda: width[0])
    clock.now = 1.0
    bar(1, 100)
    width[0], clock.now = 60, 2.0
    bar(2, 100)
    wide, narrow = drawn_lines(out)
    assert len(wide.rstrip()) > 59 and len(narrow.rstrip()) <= 59


def test_a_disabled_progress_bar_writes_nothing():
    out = io.StringIO()
    bar = ProgressBar("x", out, enabled=False)
    bar(1, 2)
    bar.close()
    assert out.getvalue() == ""


def test_the_command_draws_no_bar_when_stderr_is_not_a_terminal(tmp_path, capsys):
    from gangmaster.tools.cli import main
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\n0,1,0,10\n1,2,5,10\n")
    assert main(["replay", str(trace), "--format", "tiresias", "--nodes", "1", "--gpus-per-node", "4"]) == 0
    assert "\r" not in capsys.readouterr().err
