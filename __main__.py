"""``python -m gangmaster``: the ``gangmaster`` command, for where the console script is
not on PATH. The repository root is the package ``gangmaster`` (pyproject.toml maps it),
so this file is ``gangmaster/__main__.py`` once installed."""
import sys

from gangmaster.tools.cli import main

sys.exit(main())
