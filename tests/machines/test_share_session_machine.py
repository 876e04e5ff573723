"""SS-3..SS-17: random ShareFetch/ShareAcknowledge requests and disconnects under both profiles (a cache of 2 sessions); a
success moves the member's epoch by exactly one, a refusal changes nothing (SS-5, Kafka's full cache, aside)."""

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kipcheck.model import share_session as ss
from kipcheck.model.errors import Error

MEMBERS = st.sampled_from(("m1", "m2", "m3"))
PARTITIONS = st.frozensets(st.sampled_from(("orders:0", "orders:1", "clicks:0")), max_size=2)


class ShareSessionMachine(RuleBasedStateMachine):
    PROFILE = "kip"

    def __init__(self):
        super().__init__()
        self.cache = ss.ShareSessionCache(profile=self.PROFILE, max_sessions=2)

    def epochs(self):
        return {member: session.epoch for member, session in self.cache.by_member.items()}

    def epoch_for(self, data, member):
        cached = self.cache.by_member.get(member)
        choices = [0, -1, 1, 7] + ([cached.epoch, cached.epoch, cached.epoch + 1] if cached else [])
        return data.draw(st.sampled_from(choices))

    def judge(self, member, epoch, before, answer):
        after = self.epochs()
        if answer.clause == "SS-5":  # Kafka 4.2: the full cache refuses, and the member's old session is gone
            assert member not in after and len(after) >= self.cache.max_sessions, f"SS-5: cache {after}"
            assert {m: e for m, e in before.items() if m != member} == after, "SS-5: other sessions changed"
            return
        if answer.error != Error.NONE:
            # SS-15: a refused request changes nothing.
            assert after == before and self.cache.by_member == self.saved, f"{answer.clause}: refusal changed the cache"
            return
        others = {m: e for m, e in after.items() if m != member}
        assert others == {m: e for m, e in before.items() if m != member}, "a request changed another member's session"
        if epoch == 0:
            assert after[member] == 1, f"SS-3: a new session has epoch {after[member]}"
        elif epoch == -1:
            assert member not in after, "SS-12: the final request left the session open"
        else:
            expected = 1 if epoch == 2**31 - 1 else epoch + 1  # SS-9: 0 and -1 are taken, so MAX_VALUE + 1 is 1
            assert before[member] == epoch and after[member] == expected, f"SS-8/SS-14: epoch {epoch} -> {after[member]}"

    @rule(member=MEMBERS, add=PARTITIONS, forget=PARTITIONS, has_acks=st.booleans(), data=st.data())
    def share_fetch(self, member, add, forget, has_acks, data):
        epoch, before = self.epoch_for(data, member), self.epochs()
        self.saved = dict(self.cache.by_member)
        self.judge(member, epoch, before, self.cache.share_fetch(member, epoch, add, forget, has_acks))

    @rule(member=MEMBERS, data=st.data())
    def share_acknowledge(self, member, data):
        epoch, before = self.epoch_for(data, member), self.epochs()
        self.saved = dict(self.cache.by_member)
        self.judge(member, epoch, before, self.cache.share_acknowledge(member, epoch))

    @rule(member=MEMBERS)
    def disconnect(self, member):
        before = self.epochs()
        answer = self.cache.disconnect(member)
        # SS-17: a closed connection removes the member's session, releasing its records only if it had one.
        after = self.epochs()
        assert member not in after and after == {m: e for m, e in before.items() if m != member}, "SS-17: cache after disconnect"
        assert answer.releases == (member in before), "SS-17: records released without a session, or kept with one"

    @rule(member=MEMBERS)
    def session_reaches_the_largest_epoch(self, member):
        # Start from a long-lived session (the cache is settable for this, see the model's docstring).
        session = self.cache.by_member.get(member)
        if session is not None:
            self.cache.by_member[member] = ss.Session(2**31 - 1, session.partitions)

    @invariant()
    def epochs_are_positive(self):
        # SS-1 / SS-9: a cached epoch is never 0 or -1.
        assert all(epoch >= 1 for epoch in self.epochs().values())


TestShareSessionMachine = ShareSessionMachine.TestCase
TestShareSessionMachine.settings = settings.get_profile("kipcheck-machines")


class KafkaShareSessionMachine(ShareSessionMachine):
    PROFILE = "kafka-4.2"


TestKafkaShareSessionMachine = KafkaShareSessionMachine.TestCase
TestKafkaShareSessionMachine.settings = settings.get_profile("kipcheck-machines")
