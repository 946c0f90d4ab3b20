"""``gangmaster examples``: the example jobs, clusters, topologies, scenarios and snapshots
that ship inside the package (``gangmaster.conf``), for a user who installed the wheel and
has no checkout: the README's commands name ``conf/jobs/...``, and ``--copy conf`` makes
exactly those paths in the current folder."""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from gangmaster.conf import CONF_DIR
from gangmaster.conf.fields import ConfigError

#: the folders of conf/ that hold examples (the rest of conf/ is code and the defaults)
FOLDERS = ("jobs", "clusters", "topologies", "scenarios", "snapshots", "grafana")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "examples", help="list the example jobs, clusters and topologies installed with gangmaster, "
                         "or copy them into a folder",
        description="List the examples installed with the package (the repository's conf/jobs/, "
                    "conf/clusters/, conf/topologies/, conf/scenarios/, conf/snapshots/, the Grafana dashboard "
                    "in conf/grafana/), with the "
                    "folder they are in; with --copy DIR, copy them into DIR/jobs/, DIR/clusters/, ... "
                    "(existing files are left alone: the copy refuses, naming the first). "
                    "`gangmaster examples --copy conf` makes the README's paths, e.g. "
                    "`gangmaster run conf/jobs/mpi-allreduce.yaml`, work from any folder.",
    )
    parser.add_argument("--copy", metavar="DIR", help="copy the examples into DIR (made if missing)")
    parser.set_defaults(func=run)
    return parser


def example_files() -> list[Path]:
    """Every example file, relative to the installed conf folder, in a stable order."""
    return sorted(path.relative_to(CONF_DIR) for folder in FOLDERS
                  for path in (CONF_DIR / folder).rglob("*") if path.is_file())


def copy_examples(target: Path) -> list[Path]:
    """Copy every example into ``target`` (same layout); refuse before copying anything when
    a file is already there, so a user's edited copy is never overwritten."""
    if target.exists() and not target.is_dir():
        raise ConfigError("--copy", "", "a folder", str(target))
    files = example_files()
    for relative in files:
        if (target / relative).exists():
            raise ConfigError("--copy", "", f"a folder without the examples' files ({target / relative} "
                                            f"exists; copy into another folder or remove it)")
    for relative in files:
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CONF_DIR / relative, target / relative)
    return files


def run(args: argparse.Namespace) -> int:
    if args.copy is None:
        print(f"installed in {CONF_DIR}:")
        for relative in example_files():
            print(f"  {relative.as_posix()}")
        print("copy them with `gangmaster examples --copy DIR`")
        return 0
    target = Path(args.copy)
    files = copy_examples(target)
    print(f"copied {len(files)} example files into {target}/ ({', '.join(f'{f}/' for f in FOLDERS)})")
    print(f"try: gangmaster run {target / 'jobs' / 'mpi-allreduce.yaml'}")
    return 0
