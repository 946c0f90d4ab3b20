"""Fixtures the end-to-end tests share across files."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def yarn_cluster(tmp_path_factory):
    """The session's one local YARN cluster (see yarn_cluster.py): started on first use,
    stopped at the end of the session."""
    from yarn_cluster import start_cluster

    cluster = start_cluster(tmp_path_factory.mktemp("yarn"))
    try:
        yield cluster
    finally:
        cluster.stop(grace_s=5)
