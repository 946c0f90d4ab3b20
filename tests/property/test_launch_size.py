"""The launch check's fast measure of a whole launch agrees with the field-by-field walk:
the same byte count for every launch it accepts, and a refusal wherever the walk refuses."""
from hypothesis import given, settings, strategies as st

from gangmaster.protocol.rm_protocol import InvalidRequest, LaunchContext
from gangmaster.protocol.rm_validation import _launch_text_bytes, _walk_launch_text

text = st.text(alphabet=st.sampled_from(["a", "B", "=", "\x00", "ü", "-", " "]), max_size=6)
odd = st.one_of(text, st.integers(0, 3), st.none())
pairs = st.one_of(st.tuples(text, text), st.tuples(text), st.tuples(text, text, text), st.tuples(odd, odd), text)


def outcome(measure, launch):
    try:
        return measure(launch, "launch")
    except InvalidRequest:
        return "refused"


@settings(max_examples=300)
@given(st.lists(odd, max_size=3), st.lists(pairs, max_size=4))
def test_the_fast_measure_agrees_with_the_walk(command, env):
    launch = LaunchContext(tuple(command), tuple(env))
    assert outcome(_launch_text_bytes, launch) == outcome(_walk_launch_text, launch)
