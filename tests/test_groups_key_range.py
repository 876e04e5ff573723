"""The key-range assignor in the KIP-848 coordinator, in-process on a virtual clock (spec/key-range-assign.md KR-12 to KR-14).

Members heartbeat as a kio consumer does: each reports the units it was last
given and acknowledges a revocation by leaving it out. At every heartbeat the
test asserts that no key hash is held by two members (KR-13); the traces the
coordinator writes (key-range-assign, and the ic `own` steps of each member)
are judged by the oracle. Two deliberately broken coordinators, one whose
assignor overlaps shares and one that hands a share over before it was
revoked, are caught by those traces at KR-2 and IC-15.
"""

from __future__ import annotations

import pytest

from kipcheck.impl.groups import consumer_group
from kipcheck.impl.groups.assignors import ASSIGNORS, KeyRangeRoundRobinAssignor, KeyShare, overlap
from kipcheck.impl.groups.config import GroupConfig
from kipcheck.impl.groups.consumer import HeartbeatRequest
from kipcheck.impl.groups.coordinator import GroupCoordinator
from kipcheck.model.key_range_assign import HASH_MAX, split
from kipcheck.oracle.check import check_file

KEY_RANGE = KeyRangeRoundRobinAssignor.name
ASSIGNORS_SET = ("uniform", "range", KEY_RANGE)


class Members:
    """Members of group g on topic t (1 partition, accept.range.fetch=true) that acknowledge at once."""

    def __init__(self, tmp_path, partitions=1, key_share=True, invariant=True):
        topics = {"t": partitions}
        self.coordinator = GroupCoordinator(tmp_path / "data", GroupConfig(consumer_assignors=ASSIGNORS_SET),
                                            lambda topic: topics.get(topic, 0), lambda: sorted(topics),
                                            lambda group_id: False, fsync=False, trace_dir=tmp_path / "traces")
        self.coordinator.consumer.key_share_topic = lambda topic: key_share
        self.trace_dir = tmp_path / "traces"
        self.held: dict[str, dict] = {}   # what each member was last given (and so reports)
        self.epochs: dict[str, int] = {}
        self.now_ms = 0
        self.invariant = invariant   # off where the oracle alone must find the broken coordinator

    def beat(self, member_id: str, leave: bool = False) -> None:
        self.now_ms += 10
        joining = member_id not in self.epochs
        epoch = -1 if leave else self.epochs.get(member_id, 0)
        request = HeartbeatRequest("g", member_id, epoch, rebalance_timeout_ms=60_000,
                                   subscribed_names=("t",) if joining else None,
                                   server_assignor=KEY_RANGE if joining else None,
                                   owned=None if leave else self.held.get(member_id, {}))
        answer = self.coordinator.consumer_heartbeat(request, self.now_ms)
        assert answer.error == "NONE", answer
        if leave:
            del self.epochs[member_id], self.held[member_id]
        else:
            self.epochs[member_id] = answer.member_epoch
            if answer.assignment is not None:
                self.held[member_id] = answer.assignment
        if self.invariant:
            assert_no_shared_hash(self.coordinator)

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            for member_id in sorted(self.epochs):
                self.beat(member_id)

    def units(self, member_id: str) -> frozenset:
        return self.coordinator.consumer.groups["g"].members[member_id].assigned.get("t", frozenset())

    def verdicts(self) -> list:
        self.coordinator.consumer.traces.close()
        return [check_file(path) for path in sorted(self.trace_dir.glob("*.jsonl"))]


def assert_no_shared_hash(coordinator) -> None:
    """KR-13: two members never hold (assigned or pending revocation) overlapping units."""
    owned = [(member_id, unit) for member_id, member in coordinator.consumer.groups["g"].members.items()
             for _, unit in member.owned()]
    for index, (member_id, unit) in enumerate(owned):
        for other_id, other in owned[index + 1:]:
            assert member_id == other_id or not overlap(unit, other), f"{member_id} {unit} and {other_id} {other}"


def test_three_members_share_one_partition_then_four_then_three(tmp_path):
    members = Members(tmp_path)
    for member_id in ("a", "b", "c"):
        members.beat(member_id)
        members.settle()
    assert [members.units(member_id) for member_id in "abc"] == \
        [frozenset({KeyShare(0, *share)}) for share in split(3)]
    members.beat("d")
    members.settle()
    assert [members.units(member_id) for member_id in "abcd"] == \
        [frozenset({KeyShare(0, *share)}) for share in split(4)]
    members.beat("b", leave=True)
    members.settle()
    assert [members.units(member_id) for member_id in "acd"] == \
        [frozenset({KeyShare(0, *share)}) for share in split(3)]
    verdicts = members.verdicts()
    names = sorted(verdict.name.rsplit("/", 1)[-1] for verdict in verdicts)
    assert "key-range-assign.coordinator.g.jsonl" in names and "ic-coordinator.g%3At%3A0.jsonl" in names
    assert all(verdict.status == "ok" for verdict in verdicts), [verdict.summary() for verdict in verdicts]


def test_a_lone_member_holds_the_partition_whole_and_a_second_one_splits_it(tmp_path):
    members = Members(tmp_path)
    members.beat("a")
    assert members.units("a") == frozenset({0})
    members.beat("b")
    assert members.units("b") == frozenset()   # a still holds the whole partition: b waits
    members.beat("a")                          # told to revoke it
    members.beat("b")
    assert members.units("b") == frozenset()
    members.beat("a")                          # acknowledges; a's share needs b's half to be free of a: given
    members.settle()
    lower, upper = split(2)
    assert (members.units("a"), members.units("b")) == (frozenset({KeyShare(0, *lower)}), frozenset({KeyShare(0, *upper)}))
    assert all(verdict.status == "ok" for verdict in members.verdicts())


def test_without_accept_range_fetch_the_partition_stays_whole(tmp_path):
    members = Members(tmp_path, key_share=False)
    for member_id in ("a", "b"):
        members.beat(member_id)
        members.settle()
    assert {members.units("a"), members.units("b")} == {frozenset({0}), frozenset()}
    assert all(verdict.status == "ok" for verdict in members.verdicts())


def test_partitions_enough_for_every_member_are_not_split(tmp_path):
    members = Members(tmp_path, partitions=3)
    for member_id in ("a", "b", "c"):
        members.beat(member_id)
        members.settle()
    assert sorted(members.units(member_id) for member_id in "abc") == [frozenset({0}), frozenset({1}), frozenset({2})]
    assert all(verdict.status == "ok" for verdict in members.verdicts())


def _overlapping(self, spec):
    """A broken assignor: the first member's share reaches into the second's."""
    target = KeyRangeRoundRobinAssignor.assign(self, spec)
    first = min(member_id for member_id, assignment in target.items() if assignment)
    [share] = target[first]["t"]
    if isinstance(share, KeyShare) and share.high < HASH_MAX:
        target[first] = {"t": frozenset({KeyShare(0, share.low, share.high + 1)})}
    return target


def test_an_assignment_with_an_overlap_is_refused_and_caught_by_its_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(ASSIGNORS[KEY_RANGE], "assign", _overlapping.__get__(ASSIGNORS[KEY_RANGE]))
    members = Members(tmp_path)
    members.beat("a")
    members.now_ms += 10
    answer = members.coordinator.consumer_heartbeat(HeartbeatRequest(
        "g", "b", 0, rebalance_timeout_ms=60_000, subscribed_names=("t",), server_assignor=KEY_RANGE, owned={}),
        members.now_ms)
    assert answer.error == "UNKNOWN_SERVER_ERROR" and "KR-2" in answer.message   # never reaches a client
    [violation] = [verdict for verdict in members.verdicts() if verdict.status != "ok"]
    assert violation.clause == "KR-2" and "key-range-assign" in violation.name


def test_a_share_handed_over_before_it_was_revoked_is_caught(tmp_path, monkeypatch):
    # A broken reconciliation: only whole partitions count as held by others, so a key share is given
    # to its new owner while the previous owner still holds it.
    monkeypatch.setattr(consumer_group._Step, "taken",
                        lambda self, topic, unit: (topic, unit) in self.owned_by_others)
    members = Members(tmp_path, invariant=False)
    for member_id in ("a", "b", "c"):
        members.beat(member_id)
        members.settle()
    [violation] = [verdict for verdict in members.verdicts() if verdict.status != "ok"]
    assert violation.clause == "IC-15" and "ic-coordinator" in violation.name


def test_key_shares_on_the_wire_are_triples_of_listed_partitions():
    """KR-14: to_wire lists a share's partition and its triple; a bad KeyRanges array is refused."""
    from kipcheck.impl.broker.handlers.consumer_groups import from_wire, to_wire

    units = frozenset({2, KeyShare(0, 0, 99), KeyShare(1, 100, HASH_MAX)})
    wire = to_wire(units)
    assert wire == {"partitions": [0, 1, 2], "key_ranges": (0, 0, 99, 1, 100, HASH_MAX)}
    assert from_wire(wire["partitions"], wire["key_ranges"]) == units
    for partitions, key_ranges in (([0], (0, 1)), ([0], (1, 0, 5)), ([0], (0, 5, 4)), ([0], (0, 0, HASH_MAX + 1)),
                                   ([0], (0, 0, 1, 0, 2, 3))):
        with pytest.raises(ValueError):
            from_wire(partitions, key_ranges)


def test_a_consumer_that_refuses_individual_commit_does_not_ask_for_key_shares():
    """KR-12 (KR-4's consumer level): allow.individual.commit=false and the key-range assignor do not go together."""
    from kipcheck.impl.consumer import Consumer
    from kipcheck.impl.consumer.errors import IllegalState

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "allow.individual.commit": "false",
                         "group.remote.assignor": KEY_RANGE})
    with pytest.raises(IllegalState, match="allow.individual.commit"):
        consumer.subscribe(["t"])
    consumer.close()
