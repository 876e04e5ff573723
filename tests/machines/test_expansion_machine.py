"""EX-2/EX-3/EX-4: random expansions of a job; keys stay on their processor, or move only to new ones."""

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kipcheck.model.expansion import Expansion
from kipcheck.model.violation import Violation

KEY_HASHES = st.integers(0, 2**31 - 1)


class ExpansionMachine(RuleBasedStateMachine):
    @initialize(initial=st.integers(1, 12), keys=st.lists(KEY_HASHES, min_size=1, max_size=40, unique=True))
    def start(self, initial, keys):
        self.job = Expansion.start(initial, initial)
        self.processor = {key: self.route(key) for key in keys}

    def route(self, key):
        partition = self.job.partition_of(key)
        processor = self.job.processor_of(partition)
        # EX-2: partitions and processors are in range (checked from the answers, not the hashing).
        assert 0 <= partition < self.job.partitions, f"EX-2: key {key} to partition {partition} of {self.job.partitions}"
        assert 0 <= processor < self.job.processors, f"EX-2: partition {partition} to processor {processor} of {self.job.processors}"
        return processor

    @rule(key=KEY_HASHES)
    def add_key(self, key):
        self.processor[key] = self.route(key)

    @rule(added=st.integers(0, 40))
    def expand_partitions(self, added):
        self.job.expand_partitions(self.job.partitions + added)
        moved = {key: (was, self.route(key)) for key, was in self.processor.items() if self.route(key) != was}
        assert not moved, f"EX-2: adding partitions moved keys between processors: {moved}"

    @rule(data=st.data())
    def expand_processors(self, data):
        before = self.job.processors
        count = data.draw(st.integers(before, self.job.partitions))  # EX-3: never past the partitions
        self.job.expand_processors(count)
        for key, was in self.processor.items():
            now = self.route(key)
            assert now == was or now >= before, f"EX-2: key {key} moved from existing processor {was} to {now}"
            self.processor[key] = now

    @rule(data=st.data())
    def refused_expansions_change_nothing(self, data):
        before = (self.job.partitions, self.job.processors)
        attempt, count, clause = data.draw(st.sampled_from((
            (self.job.expand_processors, self.job.partitions + 1, "EX-3"),
            (self.job.expand_partitions, self.job.partitions - 1, "EX-4"),
            (self.job.expand_processors, self.job.processors - 1, "EX-4"),
        )))
        try:
            attempt(count)
        except Violation as violation:
            assert violation.clause == clause, f"{clause}: refused by {violation.clause}"
        else:
            raise AssertionError(f"{clause}: {attempt.__name__}({count}) from {before} was allowed")
        assert (self.job.partitions, self.job.processors) == before, f"{clause}: a refused expansion changed the job"

    @invariant()
    def never_more_processors_than_partitions(self):
        # EX-3
        assert self.job.processors <= self.job.partitions


TestExpansionMachine = ExpansionMachine.TestCase
TestExpansionMachine.settings = settings.get_profile("kipcheck-machines")
