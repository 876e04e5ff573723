"""The reference broker's KIP-287 server-side assignor (impl/groups/linear_hashing.py), on group specs as its
KIP-848 coordinator builds them: partitions to processors by linear hashing over N0 from the group's job record,
a new processor's partitions left with their holder until it joins, nothing without a readable record."""

from __future__ import annotations

from kipcheck.impl.expansion import assignor
from kipcheck.impl.expansion.assignor import instance_id
from kipcheck.impl.expansion.job import JobRecord
from kipcheck.impl.groups.assignors import GroupSpec, MemberSubscription
from kipcheck.impl.groups.linear_hashing import LinearHashingAssignor

TOPIC = "orders"
RECORD = JobRecord(10).with_partitions(15, lambda partition: 100).with_processors(15)


def spec(processors, record: JobRecord | None = RECORD, current=None, partitions: int = 15,
         topics=frozenset({TOPIC})) -> GroupSpec:
    members = {f"member-{processor}": MemberSubscription(topics, instance_id(processor)) for processor in processors}
    return GroupSpec(members, {TOPIC: partitions}, current or {}, group_id="counter",
                     job_record=None if record is None else record.encode())


def given(target) -> dict[int, int]:
    """partition -> processor, from a target assignment."""
    return {partition: int(member.removeprefix("member-")) for member, topics in target.items()
            for partition in topics.get(TOPIC, ())}


def test_every_partition_goes_to_its_processor_by_linear_hashing_over_n0():
    assignor_, record = LinearHashingAssignor(), RECORD.with_partitions(18, lambda partition: 200)
    group = spec(range(15), record=record, partitions=18)
    target = assignor_.assign(group)
    assert given(target) == {partition: assignor.target(record, partition) for partition in range(18)}
    assert [given(target)[partition] for partition in (15, 16, 17)] == [5, 6, 7]  # over N0 = 10, not 15: 0, 1, 2
    assert assignor_.check(group, target) is None


def test_a_new_processors_partitions_stay_with_their_holder_until_it_joins():
    holders = {f"member-{processor}": {TOPIC: frozenset({processor, processor + 10} & set(range(15)))}
               for processor in range(10)}
    before = given(LinearHashingAssignor().assign(spec(range(10), current=holders)))
    assert before == {partition: partition % 10 for partition in range(15)}  # 10..14 still with 0..4
    joined = given(LinearHashingAssignor().assign(spec([*range(10), 12], current=holders)))
    assert joined[12] == 12 and all(joined[p] == p % 10 for p in range(15) if p != 12)


def test_partitions_the_record_does_not_have_yet_go_to_nobody():
    target = given(LinearHashingAssignor().assign(spec(range(10), record=JobRecord(10), partitions=15)))
    assert sorted(target) == list(range(10))


def test_a_group_without_a_readable_record_gets_nothing_and_the_reason():
    assignor_ = LinearHashingAssignor()
    for group, reason in ((spec(range(3), record=None), "no KIP-287 job record"),
                          (GroupSpec({"member-0": MemberSubscription(frozenset({TOPIC}), instance_id(0))},
                                     {TOPIC: 15}, group_id="counter", job_record=b"{not json"), "job record")):
        target = assignor_.assign(group)
        assert given(target) == {}
        assert reason in assignor_.check(group, target)


def test_a_member_that_names_no_processor_gets_nothing():
    group = spec(range(15))
    members = {**group.members, "stranger": MemberSubscription(frozenset({TOPIC}), "not-a-processor")}
    target = LinearHashingAssignor().assign(GroupSpec(members, group.partitions, group_id="counter",
                                                      job_record=group.job_record))
    assert target["stranger"] == {} and len(given({k: v for k, v in target.items() if k != "stranger"})) == 15
