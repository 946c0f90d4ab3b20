"""The time of a snapshot on the command line (``snapshot --time``, ``diagnose
--snapshot-time``): one argument type, so both commands refuse the same bad moments."""
from __future__ import annotations

import pytest

from gangmaster.tools.cli import main

SNAPSHOT = "conf/snapshots/slurm/sinfo.json"


@pytest.mark.parametrize("argv", [["snapshot", SNAPSHOT, "--time"],
                                  ["diagnose", "conf/jobs/example.yaml", "--snapshot", SNAPSHOT, "--snapshot-time"]])
@pytest.mark.parametrize("moment", ["nan", "inf", "-1", "soon", "1e20"])
def test_a_moment_that_is_no_time_since_the_epoch_exits_2(capsys, argv, moment):
    with pytest.raises(SystemExit) as exited:
        main([*argv, moment])
    assert exited.value.code == 2
    assert "expected seconds since the epoch" in capsys.readouterr().err
