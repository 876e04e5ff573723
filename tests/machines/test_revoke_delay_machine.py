"""RD-2..RD-10: random coordinator decisions, polls, delayRevoke and commits; no records after a revoke
completed or a loss, revocations complete only at the start of a poll, delayRevoke never reaches past loss."""

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kipcheck.model import revoke_delay as rd
from kipcheck.model.errors import Error

PARTITION_SETS = st.frozensets(st.sampled_from(("orders:0", "orders:1", "orders:2", "clicks:0")), min_size=1)


class RevokeDelayMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.consumer = rd.RevokeDelayConsumer()
        self.pending = []  # the coordinator's decisions since the last poll, as the test made them
        self.expected_revoked = frozenset()  # the last poll's to_be_revoked minus what delayRevoke moved
        self.gone = set()  # revoke completed or lost, and not assigned again since

    @rule(kind=st.sampled_from(("assign", "revoke", "lose")), partitions=PARTITION_SETS)
    def coordinator_decides(self, kind, partitions):
        owned = set(self.consumer.owned)
        getattr(self.consumer, kind)(partitions)
        self.pending.append((kind, partitions))
        assert self.consumer.owned == owned, "RD-2: the consumer acted before its next poll"

    @rule()
    def poll(self):
        result = self.consumer.poll()
        # RD-3: the revokes completing now are exactly the previous poll's revoke-next list, less delayed ones.
        assert result.revoked == self.expected_revoked, f"RD-3: revoked {set(result.revoked)}, expected {set(self.expected_revoked)}"
        # What is gone now: completed revokes, then the decisions in the order they were made (a partition
        # lost and assigned again before this poll is owned again, though still reported lost: RD-5).
        lost_now = frozenset().union(*(ps for kind, ps in self.pending if kind == "lose"))
        assert result.lost <= lost_now, f"RD-5: {set(result.lost - lost_now)} reported lost again in a later poll"
        self.gone |= result.revoked
        for kind, partitions in self.pending:
            if kind == "lose":
                self.gone |= partitions & result.lost
            elif kind == "assign":
                self.gone -= partitions
        # RD-7: never records from a partition whose revoke completed or that was lost.
        assert not result.fetchable & self.gone, f"RD-7: records from {set(result.fetchable & self.gone)}"
        assert not result.fetchable & result.to_be_revoked, "RD-7: records from a partition pending revocation"
        self.expected_revoked, self.pending = result.to_be_revoked, []

    @rule(partitions=PARTITION_SETS)
    def delay_revoke(self, partitions):
        owned = set(self.consumer.owned)
        delayed = self.consumer.delay_revoke(partitions)
        # RD-9: never past loss or completion; all or nothing.
        if partitions & self.gone:
            assert not delayed, f"RD-9: delayRevoke accepted for {set(partitions & self.gone)}, already gone"
        if delayed:
            self.expected_revoked = self.expected_revoked - partitions
        assert self.consumer.owned == owned, "RD-3: a revoke completed outside the start of a poll"

    @precondition(lambda self: self.consumer.revoke_next)
    @rule(others=PARTITION_SETS)
    def delay_pending_revokes(self, others):
        """RD-9 where it matters: the partitions whose revoke is next, with others that may be gone."""
        self.delay_revoke(frozenset(self.consumer.revoke_next) | others)

    @rule(partitions=PARTITION_SETS)
    def commit(self, partitions):
        for partition in partitions:
            error = self.consumer.commit(partition)
            if partition in self.gone:  # RD-10: refused after completion or loss
                assert error == Error.ILLEGAL_GENERATION, f"RD-10: commit on {partition} after it was gone"

    @invariant()
    def revoke_lists_within_the_assignment(self):
        # RD-1: each partition is in one state: the revoke lists are disjoint subsets of the assignment.
        consumer = self.consumer
        assert consumer.revoke_next <= consumer.owned and consumer.revoke_thereafter <= consumer.owned
        assert not consumer.revoke_next & consumer.revoke_thereafter


TestRevokeDelayMachine = RevokeDelayMachine.TestCase
TestRevokeDelayMachine.settings = settings.get_profile("kipcheck-machines")
