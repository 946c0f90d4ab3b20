"""The command line behaves in a pipeline: a reader that goes away is not an error."""
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("argv", [
    ["selectors"],
    ["select", "--all"],
    ["run", "conf/jobs/mpi-allreduce.yaml", "--work-dir", "{tmp}/run"],
])
def test_output_into_a_closed_pipe_ends_quietly(tmp_path, argv):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line, as after `| head -0`
    argv = [a.format(tmp=tmp_path) for a in argv]
    try:
        done = subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *argv], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 141
