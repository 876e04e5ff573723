"""The server assignors: Kafka 4.2's range exactly, uniform's balance and stickiness, and the validity check."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from kipcheck.impl.groups.assignors import (
    ASSIGNORS, GroupSpec, MemberSubscription, RangeAssignor, UniformAssignor, check_assignment, register_assignor)


def spec(members: dict[str, set[str]], partitions: dict[str, int], current=None, instances=None) -> GroupSpec:
    instances = instances or {}
    return GroupSpec({member_id: MemberSubscription(frozenset(topics), instances.get(member_id))
                      for member_id, topics in members.items()}, partitions, current or {})


def test_range_gives_contiguous_ranges_the_first_members_one_more():
    # RangeAssignor's javadoc example: M0 and M1 on T1 and T2 of 3 partitions each.
    target = RangeAssignor().assign(spec({"m0": {"t1", "t2"}, "m1": {"t1", "t2"}}, {"t1": 3, "t2": 3}))
    assert target == {"m0": {"t1": frozenset({0, 1}), "t2": frozenset({0, 1})},
                      "m1": {"t1": frozenset({2}), "t2": frozenset({2})}}


def test_range_puts_static_members_first_by_instance_id():
    target = RangeAssignor().assign(spec({"a": {"t"}, "b": {"t"}, "c": {"t"}}, {"t": 5}, instances={"c": "i0"}))
    assert target["c"] == {"t": frozenset({0, 1})}
    assert target["a"] == {"t": frozenset({2, 3})} and target["b"] == {"t": frozenset({4})}


def test_range_heterogeneous_counts_each_topics_own_subscribers():
    target = RangeAssignor().assign(spec({"a": {"x", "y"}, "b": {"y"}}, {"x": 2, "y": 2}))
    assert target == {"a": {"x": frozenset({0, 1}), "y": frozenset({0})}, "b": {"y": frozenset({1})}}


def test_uniform_homogeneous_keeps_what_it_can_and_balances():
    # Three members had everything on m1; the new target moves only what balance requires.
    current = {"m1": {"t": frozenset(range(6))}}
    target = UniformAssignor().assign(spec({"m1": {"t"}, "m2": {"t"}, "m3": {"t"}}, {"t": 6}, current))
    assert target["m1"]["t"] <= frozenset(range(6)) and len(target["m1"]["t"]) == 2
    assert sorted(len(target[member]["t"]) for member in ("m2", "m3")) == [2, 2]
    assert check_assignment(spec({"m1": {"t"}, "m2": {"t"}, "m3": {"t"}}, {"t": 6}), target) is None


def test_uniform_is_sticky_when_nothing_changes():
    members = {"a": {"t"}, "b": {"t"}}
    first = UniformAssignor().assign(spec(members, {"t": 5}))
    assert UniformAssignor().assign(spec(members, {"t": 5}, first)) == first


def test_uniform_drops_topics_a_member_no_longer_subscribes_to():
    current = {"a": {"x": frozenset({0}), "y": frozenset({0})}, "b": {"y": frozenset({1})}}
    target = UniformAssignor().assign(spec({"a": {"x"}, "b": {"y"}}, {"x": 1, "y": 2}, current))
    assert target == {"a": {"x": frozenset({0})}, "b": {"y": frozenset({0, 1})}}


def test_check_assignment_names_what_is_wrong():
    group = spec({"a": {"t"}, "b": {"t"}}, {"t": 2})
    assert "both" in check_assignment(group, {"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({1})}})
    assert "unassigned" in check_assignment(group, {"a": {"t": frozenset({0})}, "b": {}})
    assert "does not exist" in check_assignment(group, {"a": {"t": frozenset({0, 1, 2})}, "b": {}})
    assert "does not subscribe" in check_assignment(spec({"a": {"t"}, "b": set()}, {"t": 1}),
                                                    {"a": {}, "b": {"t": frozenset({0})}})


def test_a_registered_assignor_is_offered_by_name():
    class Everything:
        name = "test-everything-to-the-first"

        def assign(self, group):
            first = min(group.members)
            return {member_id: ({topic: frozenset(range(group.partitions[topic])) for topic in group.subscribed(first)}
                                if member_id == first else {}) for member_id in group.members}

    register_assignor(Everything())
    try:
        assert ASSIGNORS["test-everything-to-the-first"].assign(spec({"a": {"t"}, "b": {"t"}}, {"t": 2}))["a"] \
            == {"t": frozenset({0, 1})}
    finally:
        del ASSIGNORS["test-everything-to-the-first"]


groups = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), st.sets(st.sampled_from(["x", "y", "z"])),
                         min_size=1)


@settings(max_examples=200, deadline=None)
@given(groups, st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers(0, 7)), st.randoms())
def test_both_assignors_always_give_every_partition_to_one_subscriber(members, partitions, random):
    for assignor in (UniformAssignor(), RangeAssignor()):
        group = spec(members, {topic: count for topic, count in partitions.items() if count})
        target = assignor.assign(group)
        assert check_assignment(group, target) is None, (assignor.name, target)
        # Stickiness input: any valid previous target must still give a valid one.
        shuffled = {member: assignment for member, assignment in zip(random.sample(sorted(target), len(target)),
                                                                      target.values())}
        again = assignor.assign(GroupSpec(group.members, group.partitions, shuffled))
        assert check_assignment(group, again) is None


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(0, 20))
def test_uniform_homogeneous_balances_to_within_one(member_count, partition_count):
    members = {f"m{index}": {"t"} for index in range(member_count)}
    target = UniformAssignor().assign(spec(members, {"t": partition_count} if partition_count else {}))
    sizes = [len(assignment.get("t", ())) for assignment in target.values()]
    assert max(sizes) - min(sizes) <= 1
    assert sorted(itertools.chain.from_iterable(assignment.get("t", ()) for assignment in target.values())) \
        == list(range(partition_count))
