"""selectors/identity_memo.py: answers found by the identity of the objects asked about."""
from __future__ import annotations

import gc
import weakref

from gangmaster.selectors.identity_memo import IdentityMemo


class Thing:
    pass


def test_an_answer_is_found_by_the_objects_identity_not_their_value():
    memo = IdentityMemo(10)
    a, b = (1, 2), tuple([1, 2])   # equal values, two objects
    memo.put(id(a), (a,), "about a")
    assert memo.get(id(a)) == "about a"
    assert memo.get(id(b)) is None and memo.get(id(b), "missing") == "missing"


def test_a_kept_answer_keeps_its_objects_alive_so_their_ids_stay_theirs():
    memo = IdentityMemo(10)
    thing = Thing()
    alive = weakref.ref(thing)
    key = id(thing)
    memo.put(key, (thing,), None)
    del thing
    gc.collect()
    assert alive() is not None   # no other object can be given its id while the answer is kept
    assert memo.get(key, "missing") is None   # a kept None is an answer, not a miss
    memo.clear()
    gc.collect()
    assert alive() is None and len(memo) == 0


def test_past_its_limit_the_memo_starts_afresh():
    memo = IdentityMemo(3)
    things = [Thing() for _ in range(4)]
    for n, thing in enumerate(things[:3]):
        memo.put(id(thing), (thing,), n)
    assert len(memo) == 3 and memo.get(id(things[0])) == 0
    memo.put(id(things[3]), (things[3],), 3)
    assert len(memo) == 1 and memo.get(id(things[3])) == 3 and memo.get(id(things[0])) is None
