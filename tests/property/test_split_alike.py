"""split_alike (the variables a gang's tasks share, sent once) against its definition."""
from hypothesis import given, strategies as st

from gangmaster.am.launch_env import split_alike

names = st.sampled_from(["A", "B", "C", "D", "E"])
values = st.sampled_from(["0", "1", "x"])
envs = st.lists(st.dictionaries(names, values, max_size=5), max_size=8)


@given(envs)
def test_what_is_alike_is_every_pair_all_tasks_hold_and_each_task_keeps_the_rest_in_order(tasks):
    alike, own = split_alike(tasks)
    if len(tasks) < 2:
        assert alike == {}
    else:
        assert set(alike.items()) == set.intersection(*(set(t.items()) for t in tasks))
    assert len(own) == len(tasks)
    for env, pairs in zip(tasks, own):
        assert pairs == tuple((n, v) for n, v in env.items() if n not in alike)   # the task's own order
        assert {**alike, **dict(pairs)} == env
