"""The key-range assignor model (model/key_range_assign.py), clause by clause, and its judge."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kipcheck.model.key_range_assign import HASH_MAX, Group, Member, assign, near_equal, split, validate
from kipcheck.model.violation import Violation
from kipcheck.oracle.check import check_lines

HALF = 2**62


def group(topics, members, allows=None, coordinator=True):
    return Group(topics, {m: Member(frozenset(t), share) for m, (t, share) in members.items()}, allows or {}, coordinator)


FIVE_ON_THREE = group({"events": 3}, {f"M{i}": (["events"], True) for i in range(1, 6)}, {"events": True})


def violated(clause, group_, assignment):
    with pytest.raises(Violation) as caught:
        validate(group_, assignment)
    assert caught.value.clause == clause, caught.value


def test_kr_1_null_and_the_full_range_both_mean_whole_and_gaps_are_caught():
    """KR-1: null and the full range both mean whole and gaps are caught."""
    solo = group({"orders": 1}, {"c1": (["orders"], False)})
    validate(solo, {"c1": [("orders", 0, None)]})
    validate(solo, {"c1": [("orders", 0, (0, HASH_MAX))]})
    violated("KR-1", solo, {"c1": []})
    violated("KR-1", solo, {"c1": [("orders", 1, None)]})
    violated("KR-1", solo, {"c1": [("orders", 0, (0, HASH_MAX + 1))]})


def test_kr_2_overlapping_shares_are_caught():
    """KR-2: overlapping shares are caught."""
    seed = assign(FIVE_ON_THREE)
    seed["M4"] = [("events", 0, (HALF - 1, HASH_MAX))]
    violated("KR-2", FIVE_ON_THREE, seed)


def test_kr_3_only_subscribed_topics_and_group_members():
    """KR-3: only subscribed topics and group members."""
    two = group({"orders": 1, "audit": 1}, {"c1": (["orders"], False), "c2": (["audit"], False)})
    violated("KR-3", two, {"c1": [("orders", 0, None), ("audit", 0, None)]})
    violated("KR-3", two, {"c1": [("orders", 0, None)], "c2": [("audit", 0, None)], "ghost": [("audit", 0, None)]})


@pytest.mark.parametrize("topic_allows, coordinator, c2_allows", [(False, True, True), (True, False, True), (True, True, False)])
def test_kr_4_split_needs_coordinator_topic_and_owners(topic_allows, coordinator, c2_allows):
    """KR-4: split needs coordinator topic and owners."""
    three = group({"events": 1}, {"c1": (["events"], True), "c2": (["events"], c2_allows), "c3": (["events"], True)},
                  {"events": topic_allows}, coordinator)
    violated("KR-4", three, {"c1": [("events", 0, (0, HALF - 1))], "c2": [("events", 0, (HALF, HASH_MAX))]})


def test_kr_5_sharing_only_when_opting_in_subscribers_outnumber_partitions():
    """KR-5: sharing only when opting in subscribers outnumber partitions."""
    assert FIVE_ON_THREE.sharing_triggered("events")
    two_on_two = group({"events": 2}, {"c1": (["events"], True), "c2": (["events"], True), "c3": (["events"], False)},
                       {"events": True})
    assert not two_on_two.sharing_triggered("events")
    violated("KR-5", two_on_two, {"c1": [("events", 0, (0, HALF - 1))], "c2": [("events", 0, (HALF, HASH_MAX))],
                                  "c3": [("events", 1, None)]})


def seed_long_division_split(k):
    """The seed's splitRangesByAvgSize read as Java long arithmetic: average Long.MAX / k, the rest on the last."""
    average = HASH_MAX // k
    return [(index * average, HASH_MAX if index == k - 1 else (index + 1) * average - 1) for index in range(k)]


def test_kr_6_the_seeds_halves_are_its_long_division():
    """KR-6: [0, Long.MAX/2 - 1], [Long.MAX/2, Long.MAX] in Java long arithmetic."""
    assert seed_long_division_split(2) == [(0, HASH_MAX // 2 - 1), (HASH_MAX // 2, HASH_MAX)] == [(0, HALF - 2), (HALF - 1, HASH_MAX)]


@given(st.integers(min_value=1, max_value=2**16))
def test_kr_6_the_seeds_long_division_and_the_equal_split_are_both_near_equal(k):
    """KR-6: both arithmetics pass; an owner moved by k + 1 values does not."""
    assert near_equal(seed_long_division_split(k)) and near_equal(split(k))
    if k > 1:
        shares = split(k)
        shares[0], shares[1] = (0, shares[0][1] - k - 1), (shares[0][1] - k, shares[1][1])
        assert not near_equal(shares)


@pytest.mark.parametrize("arithmetic", [split, seed_long_division_split])
def test_kr_6_the_judge_accepts_both_arithmetics_in_any_owner_order(arithmetic):
    """KR-6: any near-equal split, its ranges held by the owners in any order."""
    five = {member: [(topic, partition, tuple(share) if share else None) for topic, partition, share in entries]
            for member, entries in assign(FIVE_ON_THREE).items()}
    low, high = arithmetic(2)
    five["M1"], five["M4"] = [("events", 0, high)], [("events", 0, low)]
    five["M2"], five["M5"] = [("events", 1, low)], [("events", 1, high)]
    validate(FIVE_ON_THREE, five)


def test_kr_6_a_grossly_unequal_split_is_caught():
    """KR-6: a quarter and three quarters."""
    seed = assign(FIVE_ON_THREE)
    seed["M1"], seed["M4"] = [("events", 0, (0, HALF // 2 - 1))], [("events", 0, (HALF // 2, HASH_MAX))]
    violated("KR-6", FIVE_ON_THREE, seed)
    seed["M1"], seed["M4"] = [("events", 0, (0, HALF - 4))], [("events", 0, (HALF - 3, HASH_MAX))]
    violated("KR-6", FIVE_ON_THREE, seed)  # sizes differ by 6 > k = 2


def test_kr_8_split_arithmetic():
    """KR-8: the model's equal split."""
    assert split(1) == [(0, HASH_MAX)]
    assert split(2) == [(0, HALF - 1), (HALF, HASH_MAX)]
    assert split(3) == [(0, 3074457345618258602), (3074457345618258603, 6148914691236517205),
                        (6148914691236517206, HASH_MAX)]


@given(st.integers(min_value=1, max_value=1000))
def test_kr_8_split_is_contiguous_even_and_covers_the_space(k):
    """KR-8, KR-6: the model's split is contiguous, even and covers the space."""
    shares = split(k)
    assert shares[0][0] == 0 and shares[-1][1] == HASH_MAX and len(shares) == k
    assert all(previous[1] + 1 == share[0] for previous, share in zip(shares, shares[1:]))
    sizes = [high - low + 1 for low, high in shares]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_kr_7_triggered_topic_leaves_no_opting_in_member_idle_and_is_even():
    """KR-7: triggered topic leaves no opting in member idle and is even."""
    violated("KR-7", FIVE_ON_THREE, {"M1": [("events", 0, None)], "M2": [("events", 1, None)], "M3": [("events", 2, None)]})
    uneven = {"M1": [("events", 0, split(3)[0])], "M2": [("events", 0, split(3)[1])], "M3": [("events", 0, split(3)[2])],
              "M4": [("events", 1, None)], "M5": [("events", 2, None)]}
    violated("KR-7", FIVE_ON_THREE, uneven)


def test_kr_8_model_layout_is_the_seed_example():
    """KR-8: model layout is the seed example."""
    assert assign(FIVE_ON_THREE) == {
        "M1": [("events", 0, (0, HALF - 1))], "M2": [("events", 1, (0, HALF - 1))], "M3": [("events", 2, None)],
        "M4": [("events", 0, (HALF, HASH_MAX))], "M5": [("events", 1, (HALF, HASH_MAX))],
    }


member_ids = st.sampled_from([f"c{i}" for i in range(1, 9)])
topic_names = ["t1", "t2", "t3"]


@st.composite
def groups(draw):
    topics = {name: draw(st.integers(min_value=1, max_value=4)) for name in topic_names}
    members = draw(st.dictionaries(member_ids, st.tuples(st.sets(st.sampled_from(topic_names), max_size=3), st.booleans()),
                                   min_size=1, max_size=8))
    allows = {name: draw(st.booleans()) for name in topic_names}
    return group(topics, members, allows, draw(st.booleans()))


@settings(max_examples=300, deadline=None)
@given(groups())
def test_kr_8_model_layout_always_validates(any_group):
    """KR-8: model layout always validates."""
    validate(any_group, assign(any_group))


def _trace(args, assignment):
    header = {"format": "kipcheck-trace", "version": 1, "machine": "key-range-assign"}
    step = {"step": 1, "at_ms": 0, "actor": "c1", "op": "assign", "args": args, "observed": {"assignment": assignment}}
    return [json.dumps(header), json.dumps(step)]


def test_judge_rejects_ill_shaped_input_as_malformed():
    members = {"c1": {"topics": ["orders"], "allow_key_share": True}}
    for args, assignment, reason in (
        ({"topics": {"orders": 0}, "members": members}, {}, "partition counts"),
        ({"topics": {"orders": 1}, "members": {"c1": {"topics": ["nope"], "allow_key_share": True}}}, {}, "not in args.topics"),
        ({"topics": {"orders": 1}, "members": {"c1": {"topics": ["orders"]}}}, {}, "allow_key_share"),
        ({"topics": {"orders": 1}, "members": members}, {"c1": [["orders", 0]]}, "[topic, partition"),
    ):
        verdict = check_lines(_trace(args, assignment))
        assert verdict.status == "malformed" and reason in verdict.reason, verdict.summary()
