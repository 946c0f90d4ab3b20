"""The AM's plain counters and histograms (am/ops/metrics.py) serve exactly what the client
library's own Counter and Histogram serve after the same calls: the same exposition
text, with and without the ``_created`` series. They stand in for the library's classes
(one writer, no lock per call) and read its private switch for ``_created``: if a
release of prometheus_client changed what it serves or how that switch is kept, this
fails."""
from __future__ import annotations

import re

import prometheus_client
from hypothesis import given, strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from gangmaster.am.ops.metrics import PlainCounter, PlainHistogram

BUCKETS = (0.5, 1, 5, 30, 600)
amounts = st.floats(min_value=0, max_value=1e4, allow_nan=False, allow_infinity=False)


def _text(registry: CollectorRegistry) -> str:
    """The exposition text, each ``_created`` timestamp (when the metric was made) blanked."""
    return re.sub(r"(_created(?:\{[^}]*\})?) \S+", r"\1 T", generate_latest(registry).decode())


def _both_ways(check) -> None:
    for created in (True, False):
        (prometheus_client.enable_created_metrics if created else prometheus_client.disable_created_metrics)()
        try:
            check(created)
        finally:
            prometheus_client.enable_created_metrics()


@given(st.lists(amounts, max_size=20))
def test_a_plain_counter_serves_what_the_library_counter_serves(increments):
    def check(created: bool) -> None:
        ours, theirs = CollectorRegistry(), CollectorRegistry()
        plain = PlainCounter("gangmaster_things", "Things counted", registry=ours)
        library = Counter("gangmaster_things", "Things counted", registry=theirs)
        for amount in increments:
            plain.inc(amount)
            library.inc(amount)
        assert _text(ours) == _text(theirs)
        assert ("gangmaster_things_created" in _text(ours)) is created

    _both_ways(check)


@given(st.lists(st.one_of(amounts, st.sampled_from(BUCKETS)), max_size=30))
def test_a_plain_histogram_serves_what_the_library_histogram_serves(observations):
    def check(created: bool) -> None:
        ours, theirs = CollectorRegistry(), CollectorRegistry()
        plain = PlainHistogram("gangmaster_wait_seconds", "Waits", buckets=BUCKETS, registry=ours)
        library = Histogram("gangmaster_wait_seconds", "Waits", buckets=BUCKETS, registry=theirs)
        for amount in observations:   # a bound itself counts in its own bucket (le: less or equal)
            plain.observe(amount)
            library.observe(amount)
        assert _text(ours) == _text(theirs)
        assert ("gangmaster_wait_seconds_created" in _text(ours)) is created

    _both_ways(check)


def test_a_counter_refuses_to_go_down_as_the_library_does():
    registry = CollectorRegistry()
    plain = PlainCounter("gangmaster_things", "Things counted", registry=registry)
    try:
        plain.inc(-1)
    except ValueError as exc:
        assert "non-negative" in str(exc)
    else:
        raise AssertionError("a negative increment was taken")

