"""The KIP-983 consumer model (model/revoke_delay.py), clause by clause, and its judge."""

import json

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import pytest

from kipcheck.model.revoke_delay import (
    COORDINATOR, NOT_OWNED, OWNED, REVOKE_NEXT, REVOKE_THEREAFTER, RevokeDelayConsumer,
)
from kipcheck.model.violation import Violation
from kipcheck.oracle.check import check_lines

P0, P1, P2 = "orders:0", "orders:1", "orders:2"


def consumer_owning(*partitions):
    consumer = RevokeDelayConsumer()
    consumer.assign(partitions)
    consumer.poll()
    return consumer


def test_rd_1_every_partition_has_one_state():
    """RD-1: every partition has one state."""
    consumer = consumer_owning(P0, P1)
    consumer.revoke([P1])
    consumer.poll()
    assert [consumer.state(p) for p in (P0, P1, P2)] == [OWNED, REVOKE_NEXT, NOT_OWNED]
    consumer.delay_revoke([P1])
    assert consumer.state(P1) == REVOKE_THEREAFTER


def test_rd_2_coordinator_decisions_are_learned_at_the_next_poll():
    """RD-2: coordinator decisions are learned at the next poll."""
    consumer = consumer_owning(P0)
    consumer.revoke([P0])
    assert consumer.state(P0) == OWNED
    assert consumer.poll().to_be_revoked == {P0}


def test_rd_3_start_of_poll_steps_in_order():
    """RD-3: start of poll steps in order."""
    consumer = consumer_owning(P0, P1, P2)
    consumer.revoke([P0, P1])
    consumer.lose([P2])
    first = consumer.poll()
    assert (first.revoked, first.to_be_revoked, first.lost) == (set(), {P0, P1}, {P2})
    consumer.delay_revoke([P1])
    second = consumer.poll()
    # step 1 completes P0, step 2 clears the lost list, step 3 makes P1 revoke-next.
    assert (second.revoked, second.to_be_revoked, second.lost) == ({P0}, {P1}, set())
    assert consumer.poll().revoked == {P1}


def test_rd_4_repeated_revoke_does_not_undo_a_delay_and_unowned_is_ignored():
    """RD-4: repeated revoke does not undo a delay and unowned is ignored."""
    consumer = consumer_owning(P0)
    consumer.revoke([P0])
    consumer.poll()
    consumer.delay_revoke([P0])
    consumer.revoke([P0, P2])
    result = consumer.poll()
    # P0 was delayed: step 3 moves it to revoke-next; the repeated request changes nothing.
    assert (result.revoked, result.to_be_revoked) == (set(), {P0})
    assert consumer.state(P2) == NOT_OWNED


def test_rd_5_lost_list_is_visible_until_the_next_poll():
    """RD-5: lost list is visible until the next poll."""
    consumer = consumer_owning(P0, P1)
    consumer.revoke([P1])
    consumer.lose([P1, P2])
    result = consumer.poll()
    assert (result.lost, result.to_be_revoked) == ({P1}, set())
    assert consumer.poll().lost == set()


def test_rd_6_assign_cancels_a_revocation_still_pending_when_it_is_learned():
    """RD-6: assign cancels a revocation still pending when it is learned."""
    consumer = consumer_owning(P0)
    consumer.revoke([P0])
    consumer.poll()
    consumer.delay_revoke([P0])
    consumer.assign([P0, P1])
    result = consumer.poll()
    assert (result.revoked, result.to_be_revoked, result.fetchable) == (set(), set(), {P0, P1})


def test_rd_6_a_revoke_completed_at_poll_start_is_not_cancelled():
    """RD-6: a revoke completed at poll start is not cancelled."""
    consumer = consumer_owning(P0)
    consumer.revoke([P0])
    consumer.poll()
    consumer.assign([P0])
    result = consumer.poll()
    # RD-3 step 1 completes the revoke before the assignment is learned: revoked, then owned anew.
    assert (result.revoked, result.fetchable) == ({P0}, {P0})


def test_rd_7_records_never_from_pending_revoked_or_lost_partitions():
    """RD-7: records never from pending revoked or lost partitions."""
    consumer = consumer_owning(P0, P1, P2)
    consumer.revoke([P1])
    consumer.lose([P2])
    consumer.poll()
    consumer.check_records_from([P0])
    for partition, state in ((P1, REVOKE_NEXT), (P2, NOT_OWNED), ("audit:0", NOT_OWNED)):
        with pytest.raises(Violation) as caught:
            consumer.check_records_from([P0, partition])
        assert caught.value.clause == "RD-7" and state in caught.value.observed


def test_rd_8_to_be_revoked_is_the_revoke_next_list():
    """RD-8: to be revoked is the revoke next list."""
    consumer = consumer_owning(P0, P1)
    consumer.revoke([P0, P1])
    assert consumer.poll().to_be_revoked == consumer.revoke_next == {P0, P1}


def test_rd_9_delay_revoke_is_all_or_nothing():
    """RD-9: delay revoke is all or nothing."""
    consumer = consumer_owning(P0, P1)
    consumer.revoke([P0, P1])
    consumer.lose([P1])
    consumer.poll()
    assert consumer.delay_revoke([P0, P1]) is False
    assert consumer.state(P0) == REVOKE_NEXT
    assert consumer.delay_revoke([P0]) is True
    assert consumer.state(P0) == REVOKE_THEREAFTER
    assert consumer.delay_revoke([]) is True


def test_rd_10_commit_while_owned_refused_after_completion_or_loss():
    """RD-10: commit while owned refused after completion or loss."""
    consumer = consumer_owning(P0, P1)
    consumer.revoke([P0])
    consumer.lose([P1])
    consumer.poll()
    assert (consumer.commit(P0), consumer.commit(P1)) == ("NONE", "ILLEGAL_GENERATION")
    consumer.poll()
    assert consumer.commit(P0) == "ILLEGAL_GENERATION"


def test_rd_11_a_revocation_is_acknowledged_only_after_it_completed():
    """RD-11: release (the heartbeat's acknowledgement) only once the revoke completed at a poll, or after a loss."""
    consumer = consumer_owning(P0, P1, P2)
    consumer.revoke([P0])
    for not_yet in (lambda: None, consumer.poll):  # requested, then learned: still owned
        not_yet()
        with pytest.raises(Violation) as caught:
            consumer.release([P0])
        assert caught.value.clause == "RD-11"
    consumer.poll()
    consumer.release([P0])  # completed at the start of this poll
    consumer.lose([P1])
    consumer.poll()
    consumer.release([P1, "audit:0"])  # lost, never assigned


def test_rd_12_the_coordinators_view_applies_its_decisions_at_once_and_releases_end_ownership():
    """RD-12: in the coordinator's view what it did applies at once; a release ends the member's ownership."""
    member = RevokeDelayConsumer(view=COORDINATOR)
    member.assign([P0, P1])
    assert member.commit(P1) == "NONE"
    member.revoke([P1])
    assert member.commit(P1) == "NONE"  # pending revocation: the member may still commit it
    member.release([P1])
    assert (member.commit(P0), member.commit(P1)) == ("NONE", "ILLEGAL_GENERATION")
    member.lose([P0])
    assert member.commit(P0) == "ILLEGAL_GENERATION"


def test_rd_13_a_commit_racing_an_unlearned_loss_may_be_refused():
    """RD-13: a loss not yet learned makes a refused commit allowed; the partition stays owned until the poll."""
    consumer = consumer_owning(P0, P1)
    consumer.lose([P0])
    assert consumer.commit_may_be_refused(P0) and not consumer.commit_may_be_refused(P1)
    assert consumer.commit(P0) == "NONE"
    consumer.poll()
    assert not consumer.commit_may_be_refused(P0) and consumer.commit(P0) == "ILLEGAL_GENERATION"


partitions = st.sets(st.sampled_from([P0, P1, P2, "audit:0"]), max_size=3)


class ConsumerMachine(RuleBasedStateMachine):
    """Random coordinator decisions and consumer calls keep the model's safety properties."""

    def __init__(self):
        super().__init__()
        self.consumer = RevokeDelayConsumer()
        self.requested: set[str] = set()  # revoke requested and learned, not yet completed or lost

    @rule(chosen=partitions)
    def assign(self, chosen):
        self.consumer.assign(chosen)

    @rule(chosen=partitions)
    def revoke(self, chosen):
        self.consumer.revoke(chosen)

    @rule(chosen=partitions)
    def lose(self, chosen):
        self.consumer.lose(chosen)

    @rule(chosen=partitions)
    def delay_revoke(self, chosen):
        before = (set(self.consumer.revoke_next), set(self.consumer.revoke_thereafter))
        if not self.consumer.delay_revoke(chosen):
            assert not chosen <= self.consumer.owned
            assert (self.consumer.revoke_next, self.consumer.revoke_thereafter) == before

    @rule()
    def poll(self):
        owned_before = set(self.consumer.owned)
        result = self.consumer.poll()
        assert result.revoked <= owned_before
        # A partition revoked or lost and assigned again in one poll is fetchable anew (RD-6).
        assert not result.fetchable & result.to_be_revoked
        assert result.fetchable <= self.consumer.owned

    @invariant()
    def revoke_lists_are_disjoint_subsets_of_the_assignment(self):
        next_, thereafter = self.consumer.revoke_next, self.consumer.revoke_thereafter
        assert next_ <= self.consumer.owned and thereafter <= self.consumer.owned
        assert not next_ & thereafter

    @invariant()
    def commits_are_allowed_exactly_on_owned_partitions(self):
        for partition in (P0, P1, P2, "audit:0"):
            assert (self.consumer.commit(partition) == "NONE") == (partition in self.consumer.owned)


ConsumerMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestConsumerMachine = ConsumerMachine.TestCase


def _trace(*steps):
    header = {"format": "kipcheck-trace", "version": 1, "machine": "revoke-delay"}
    return [json.dumps(header)] + [json.dumps({"step": n, "at_ms": 0, "actor": "c1", **s}) for n, s in enumerate(steps, 1)]


def test_judge_rejects_bad_partition_names_and_offsets():
    verdict = check_lines(_trace({"op": "assign", "args": {"partitions": ["orders"]}}))
    assert verdict.status == "malformed" and "topic:partition" in verdict.reason
    verdict = check_lines(_trace({"op": "commit", "args": {"partition": "orders:0", "offset": -5}}))
    assert verdict.status == "malformed" and "offset" in verdict.reason


def test_judge_compares_poll_lists_as_sets():
    verdict = check_lines(_trace(
        {"op": "assign", "args": {"partitions": [P0, P1]}},
        {"op": "poll", "observed": {"records_from": [P1, P0, P1], "to_be_revoked": [], "lost": [], "revoked": []}},
    ))
    assert verdict.status == "ok", verdict.summary()


def _coordinator_trace(*steps):
    header = {"format": "kipcheck-trace", "version": 1, "machine": "revoke-delay", "config": {"view": "coordinator"}}
    return [json.dumps(header)] + [json.dumps({"step": n, "at_ms": 0, "actor": "m1", **s}) for n, s in enumerate(steps, 1)]


def test_judge_refuses_consumer_ops_in_the_coordinators_view_and_unknown_views():
    for op in ({"op": "poll", "observed": {"revoked": []}}, {"op": "delay_revoke", "args": {"partitions": []}}):
        verdict = check_lines(_coordinator_trace(op))
        assert verdict.status == "malformed" and "inside the consumer" in verdict.reason
    header = {"format": "kipcheck-trace", "version": 1, "machine": "revoke-delay", "config": {"view": "broker"}}
    verdict = check_lines([json.dumps(header)])
    assert verdict.status == "malformed" and "view" in verdict.reason


def test_judge_allows_a_refused_commit_only_while_a_loss_is_unlearned():
    assign = {"op": "assign", "args": {"partitions": [P0]}}
    poll = {"op": "poll", "observed": {"revoked": []}}
    refused = {"op": "commit", "args": {"partition": P0, "offset": 5}, "observed": {"error": "ILLEGAL_GENERATION"}}
    assert check_lines(_trace(assign, poll, {"op": "lose", "args": {"partitions": [P0]}}, refused)).status == "ok"
    verdict = check_lines(_trace(assign, poll, refused))
    assert verdict.status == "violation" and verdict.clause == "RD-10"
