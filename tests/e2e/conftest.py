"""Fixtures the end-to-end tests share across files."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def yarn_session_cluster(tmp_path_factory):
    """The session's one local YARN cluster, for every worker (see yarn_cluster.py). A test
    asks for it through ``yarn_cluster`` or ``yarn_cluster_alone``."""
    from yarn_cluster import shared_cluster

    with shared_cluster(tmp_path_factory) as cluster:
        yield cluster


@pytest.fixture
def yarn_cluster(yarn_session_cluster):
    """The cluster, shared with the other tests that share it while this one runs."""
    from yarn_cluster import turn

    with turn(yarn_session_cluster, alone=False) as cluster:
        yield cluster


@pytest.fixture
def yarn_cluster_alone(yarn_session_cluster):
    """The cluster to this test alone while it runs (it kills a NodeManager, takes every GPU)."""
    from yarn_cluster import turn

    with turn(yarn_session_cluster, alone=True) as cluster:
        yield cluster
