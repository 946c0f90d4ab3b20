"""Every ``--help`` answers the question it is asked: nothing cut off, nothing twice."""
import importlib

import pytest

from gangmaster.tools.bench.cli import BENCHES
from gangmaster.tools.cli import main


@pytest.mark.parametrize("bench", BENCHES)
def test_bench_help_shows_the_whole_module_text(capsys, bench):
    with pytest.raises(SystemExit):
        main(["bench", bench, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    doc = importlib.import_module(f"gangmaster.tools.bench.{bench}").__doc__
    last_paragraph = " ".join(doc.strip().split("\n\n")[-1].split())
    assert last_paragraph in out
