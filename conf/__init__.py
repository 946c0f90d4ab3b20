"""The YAML that ships with gangmaster: documented defaults, example clusters, jobs and
GPU topology presets. A package (not a namespace) so `importlib.resources` and editable
installs can find the files."""
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent


def conf_path(relative: str) -> Path:
    """Path of a shipped configuration file, e.g. ``conf_path("clusters/default.yaml")``."""
    return CONF_DIR / relative
