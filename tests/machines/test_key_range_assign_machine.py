"""KR-1..KR-7: a group that changes at random; every assignment covers each partition's hash space exactly once
and never splits where the coordinator, the topic or a member disallows it."""

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kipcheck.model import key_range_assign as kr

TOPICS = ("orders", "payments", "clicks")
HASH_MAX = 2**63 - 1


class KeyRangeAssignMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.partitions = {topic: 1 for topic in TOPICS}
        self.members = {}
        self.topic_allows = {}
        self.coordinator_allows_ic = True

    def group(self):
        return kr.Group(dict(self.partitions), dict(self.members), dict(self.topic_allows), self.coordinator_allows_ic)

    @rule(member=st.integers(0, 9), topics=st.sets(st.sampled_from(TOPICS), min_size=1), allow=st.booleans())
    def join(self, member, topics, allow):
        self.members[f"m{member}"] = kr.Member(frozenset(topics), allow)

    @rule(member=st.integers(0, 9))
    def leave(self, member):
        self.members.pop(f"m{member}", None)

    @rule(topic=st.sampled_from(TOPICS), added=st.integers(1, 3))
    def add_partitions(self, topic, added):
        self.partitions[topic] += added

    @rule(topic=st.sampled_from(TOPICS), allow=st.booleans())
    def set_topic_allows(self, topic, allow):
        self.topic_allows[topic] = allow

    @rule(allow=st.booleans())
    def set_coordinator_allows(self, allow):
        self.coordinator_allows_ic = allow

    @invariant()
    def each_partition_covered_exactly_once_and_splits_only_where_allowed(self):
        group = self.group()
        assignment = kr.assign(group)
        owners = {}
        for member, entries in assignment.items():
            for topic, partition, share in entries:
                assert topic in self.members[member].topics, f"KR-3: {member} got unsubscribed {topic}"
                owners.setdefault((topic, partition), []).append((share or (0, HASH_MAX), member))
        subscribed = {topic for info in self.members.values() for topic in info.topics}
        for topic in subscribed:
            for partition in range(self.partitions[topic]):
                shares = sorted(owners.get((topic, partition), []))
                next_hash = 0
                for (low, high), _ in shares:  # KR-1/KR-2: contiguous from 0 to HASH_MAX, nothing twice
                    assert low == next_hash and low <= high, f"KR-1/KR-2: {topic}:{partition} shares {shares}"
                    next_hash = high + 1
                assert next_hash == HASH_MAX + 1, f"KR-1: {topic}:{partition} covered only to {next_hash - 1}"
                if len(shares) > 1:  # KR-4: a split needs coordinator, topic and every owner to allow it
                    split = f"{topic}:{partition} split among {[member for _, member in shares]}"
                    assert self.coordinator_allows_ic, f"KR-4: {split} though the coordinator disallows IC"
                    assert self.topic_allows.get(topic, False), f"KR-4: {split} though the topic disallows sharing"
                    refusing = [member for _, member in shares if not self.members[member].allow_key_share]
                    assert not refusing, f"KR-4: {split} though {refusing} disallow key share"
        kr.validate(group, assignment)  # the model's own answer must be one it allows


TestKeyRangeAssignMachine = KeyRangeAssignMachine.TestCase
TestKeyRangeAssignMachine.settings = settings.get_profile("kipcheck-machines")
