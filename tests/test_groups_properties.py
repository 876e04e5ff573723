"""KIP-848 groups under random members, heartbeats, leaves, timeouts and topic growth (hypothesis).

Safety: no partition is ever held (assigned or pending revocation) by two
members at once, whatever the members do: a partition reaches its new owner
only after the previous one acknowledged the revocation, or was fenced.
Liveness: once every member heartbeats honestly, the group settles with every
member holding exactly its target assignment. A seeded bug (partitions given
before their revocation) must break the safety invariant.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from kipcheck.impl.groups.config import GroupConfig
from kipcheck.impl.groups.consumer import ConsumerGroups, HeartbeatRequest

MEMBERS = ("m1", "m2", "m3", "m4")
SESSION_MS, REBALANCE_MS = 5000, 3000
KNOWN_ERRORS = {"NONE", "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH"}


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.topics = {"t": 4, "u": 2}
        self.groups = ConsumerGroups(GroupConfig(consumer_session_timeout_ms=SESSION_MS, consumer_heartbeat_interval_ms=1000),
                                     lambda topic: self.topics.get(topic, 0), lambda: sorted(self.topics))
        self.now_ms = 0
        self.epochs: dict[str, int] = {}  # what each live client believes its epoch is

    def beat(self, member_id: str, **fields) -> None:
        answer = self.groups.heartbeat(HeartbeatRequest("g", member_id, **fields), self.now_ms)
        assert answer.error in KNOWN_ERRORS, answer
        if answer.error == "NONE":
            self.epochs[member_id] = answer.member_epoch
        else:
            self.epochs.pop(member_id, None)  # fenced or unknown: the client rejoins later

    @rule(member_id=st.sampled_from(MEMBERS), topics=st.sets(st.sampled_from(["t", "u", "missing"])),
          assignor=st.sampled_from([None, "uniform", "range"]))
    def join(self, member_id, topics, assignor):
        self.beat(member_id, member_epoch=0, rebalance_timeout_ms=REBALANCE_MS, subscribed_names=tuple(topics),
                  server_assignor=assignor, owned={})

    @precondition(lambda self: self.epochs)
    @rule(data=st.data(), report=st.sampled_from(["acknowledge", "still-owning", "nothing-said", "stale"]))
    def heartbeat(self, data, report):
        member_id = data.draw(st.sampled_from(sorted(self.epochs)))
        member = self.group().members.get(member_id)
        held = member.assigned if member else {}
        owned = {"acknowledge": held, "nothing-said": None}.get(report, {**held, **(member.pending_revocation if member else {})})
        epoch = self.epochs[member_id] - (1 if report == "stale" and self.epochs[member_id] > 1 else 0)
        self.beat(member_id, member_epoch=epoch, owned=owned)

    @precondition(lambda self: self.epochs)
    @rule(data=st.data())
    def leave(self, data):
        member_id = data.draw(st.sampled_from(sorted(self.epochs)))
        self.groups.heartbeat(HeartbeatRequest("g", member_id, -1), self.now_ms)
        self.epochs.pop(member_id)

    @rule(ms=st.integers(1, 4000))
    def time_passes(self, ms):
        self.now_ms += ms
        self.groups.tick(self.now_ms)

    @rule()
    def topic_grows(self):
        self.topics["u"] = min(self.topics["u"] + 1, 6)

    def group(self):
        return self.groups.groups.get("g") or type("NoGroup", (), {"members": {}, "target": {}})()

    @invariant()
    def no_partition_is_held_twice(self):
        holders: dict[tuple[str, int], str] = {}
        for member_id, member in self.group().members.items():
            for key in member.owned():
                assert key not in holders, f"{key} held by {holders[key]} and {member_id}"
                holders[key] = member_id

    @invariant()
    def members_are_assigned_only_existing_partitions_of_their_topics(self):
        for member in self.group().members.values():
            for topic, partitions in member.assigned.items():
                assert max(partitions) < self.topics.get(topic, 0)

    def teardown(self):
        """The live members heartbeat honestly (acknowledging) every second; fenced ones stay silent until
        their session expires. Then the group must have settled."""
        for _ in itertools.repeat(None, 2 * SESSION_MS // 1000):
            self.time_passes(1000)
            for member_id in sorted(self.epochs):
                member = self.group().members.get(member_id)
                self.beat(member_id, member_epoch=self.epochs[member_id], owned=member.assigned if member else {})
            self.no_partition_is_held_twice()
        group = self.groups.groups.get("g")
        if group is None or not group.members:
            return
        assert group.state() == "Stable", {m: (x.state, x.epoch) for m, x in group.members.items()}
        for member_id, member in group.members.items():
            target = group.target.get(member_id, {})  # no target yet: an empty one (Kafka's Assignment.EMPTY)
            assert member.assigned == {topic: parts for topic, parts in target.items() if parts}


ConsumerGroupMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestConsumerGroups = ConsumerGroupMachine.TestCase


def test_the_machine_catches_partitions_given_before_their_revocation(monkeypatch):
    """Seeded bug: a member gets partitions another still holds. The safety invariant must fail."""
    from kipcheck.impl.groups.consumer_group import ConsumerGroup

    monkeypatch.setattr(ConsumerGroup, "owned_by_others", lambda self, member_id: set())
    quick = settings(max_examples=300, stateful_step_count=40, deadline=None, database=None, phases=[Phase.generate])
    with pytest.raises(AssertionError, match="held by"):
        run_state_machine_as_test(ConsumerGroupMachine, settings=quick)
