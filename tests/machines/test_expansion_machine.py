"""EX-2 to EX-12: random jobs. Keys stay on their processor as partitions grow and move only to new processors;
a job's processors, driven by the model, keep every key's records in write order, output once.

The routing rules (EX-2 to EX-4) are checked from the answers. For the job (EX-5 to EX-12) the machine proposes
steps (appends, assignments, reads with a use, commits, ready, releases), mostly the ones a correct processor
would take and sometimes wrong ones; the model accepts or refuses each, and a refusal must change nothing. What
the model accepted is then checked against facts the machine keeps itself, independent of the model's rules:
each processor reads a split partition only after its sources up to where they were split, applies each key's
records as a prefix of their write order (per-key order across splits, none skipped, none twice), each record is
output at most once and each key's outputs follow write order, and a processor applies only keys that were its
own under some processor count the job had.
"""

import copy
from collections import defaultdict

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kipcheck.model.expansion import PROCESS, REBUILD, SKIP, Expansion, drain_points, linear_hash, source
from kipcheck.model.violation import Violation

KEY_HASHES = st.integers(0, 2**31 - 1)


class ExpansionMachine(RuleBasedStateMachine):
    @initialize(initial=st.integers(1, 6), keys=st.lists(KEY_HASHES, min_size=1, max_size=12, unique=True),
                lag=st.integers(0, 3))
    def start(self, initial, keys, lag):
        self.job = Expansion.start(initial, initial, lag)
        self.keys = keys
        self.processor = {key: self.route(key) for key in keys}
        self.counts = {initial}  # every processor count the job had
        self.written = defaultdict(list)  # key hash -> [(partition, offset)] in write order
        self.applied = defaultdict(lambda: defaultdict(list))  # processor -> key hash -> [(partition, offset)]
        self.output = defaultdict(list)  # key hash -> [(partition, offset)] in output order
        self.split_at = {}  # new partition -> (source, the source's log end when it was added), kept here
        self.read_to = defaultdict(dict)  # processor -> partition -> next offset, from the reads accepted

    def route(self, key):
        partition = self.job.partition_of(key)
        processor = self.job.processor_of(partition)
        # EX-2: partitions and processors are in range (checked from the answers, not the hashing).
        assert 0 <= partition < self.job.partitions, f"EX-2: key {key} to {partition} of {self.job.partitions}"
        assert 0 <= processor < self.job.processors, f"EX-2: {partition} to {processor} of {self.job.processors}"
        return processor

    def attempt(self, action, *args):
        """Apply a step the model may refuse; a refusal must leave the model as it was. True when accepted."""
        before = copy.deepcopy(self.job.__dict__)
        try:
            action(*args)
        except Violation:
            assert self.job.__dict__ == before, f"a refused {action.__name__}{args} changed the model"
            return False
        return True

    def pending(self):
        return any(self.job.holder.get(partition) is not None
                   for held in self.job.joining.values() for partition in held)

    # Routing: EX-2 to EX-4.

    @rule(key=KEY_HASHES)
    def add_key(self, key):
        self.processor[key] = self.route(key)
        self.keys.append(key)

    def records(self):
        return sum(len(records) for records in self.written.values())

    # Expansions wait for a log of a few records per partition: splitting empty partitions shows little.
    @precondition(lambda self: self.job.partitions < 4 * self.job.initial_processors + 4
                  and self.records() >= 3 * self.job.partitions)
    @rule(added=st.integers(0, 4))
    def expand_partitions(self, added):
        self.grow_partitions(added)

    def grow_partitions(self, added):
        before = self.job.partitions
        if not self.attempt(self.job.expand_partitions, before + added):
            assert self.pending(), "EX-12 is the only refusal of a growing partition count"
            return
        for partition in range(before, before + added):
            origin = source(partition, before, self.job.initial_processors)
            self.split_at[partition] = (origin, len(self.written_to(origin)))
        moved = {key: (was, self.route(key)) for key, was in self.processor.items() if self.route(key) != was}
        assert not moved, f"EX-2: adding partitions moved keys between processors: {moved}"

    @precondition(lambda self: self.records() >= 3 * self.job.partitions)
    @rule(data=st.data())
    def expand_processors(self, data):
        self.grow_processors(data)

    def grow_processors(self, data):
        before = self.job.processors
        count = data.draw(st.integers(before, min(before + 3, self.job.partitions)))  # EX-3: never past the partitions
        if not self.attempt(self.job.expand_processors, count):
            assert self.pending(), "EX-12 is the only refusal of a processor count within the partitions"
            return
        self.counts.add(count)
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

    # The job: EX-5 to EX-12.

    @rule(data=st.data(), count=st.integers(1, 6))
    def append(self, data, count):
        self.produce(data, count)

    def produce(self, data, count):
        for key in data.draw(st.lists(st.sampled_from(self.keys), min_size=count, max_size=count)):
            partition = self.job.partition_of(key)
            if self.job.partitions > 1 and data.draw(st.integers(0, 19)) == 0:
                wrong = (partition + 1) % self.job.partitions
                assert not self.attempt(self.job.append, wrong, key), "EX-2: a record in the wrong partition"
            offset = self.job.append(partition, key)
            self.written[key].append((partition, offset))

    def assign_free(self, data, processors):
        """The group assigns free partitions of these processors at their committed offsets (EX-11)."""
        for partition in range(self.job.partitions):
            processor = self.job.processor_of(partition)
            if processor in processors and self.job.holder.get(partition) is None:
                self.attempt(self.job.assign, processor, partition, self.job.committed.get(partition, 0))

    def reads(self, processor):
        """The partitions a processor may have business reading: held, to take over, and their sources."""
        mine = {p for p, holder in self.job.holder.items() if holder == processor}
        mine |= self.job.joining.get(processor, set())
        return sorted(mine | {source for partition in mine for source, _ in drain_points(partition, self.job.splits)})

    @rule(data=st.data(), count=st.integers(1, 3), produce=st.integers(0, 6))
    def round(self, data, count, produce):
        """Every processor, in an order drawn, as a correct one would do it (now and then using a record wrongly),
        with up to `produce` records written before each: the group assigns its free partitions; it releases what a
        ready new processor waits for, reads up to `count` records of each partition it reads, commits, and says
        ready when it has caught up."""
        self.work(data, count, produce)

    def work(self, data, count, produce):
        for processor in data.draw(st.permutations(range(self.job.processors))):
            self.produce(data, data.draw(st.integers(0, produce)))
            self.assign_free(data, {processor})
            for partition in sorted(p for n in self.job.ready_processors for p in self.job.joining[n]
                                    if self.job.holder.get(p) == processor):
                self.attempt(self.job.release, processor, partition, self.position(processor, partition))
            for partition in self.reads(processor):
                self.read_records(data, processor, partition, count)
            for partition in sorted(p for p, holder in self.job.holder.items() if holder == processor):
                self.attempt(self.job.commit, partition, self.position(processor, partition), processor)
            if processor in self.job.joining and processor not in self.job.ready_processors:
                self.attempt(self.job.ready, processor)

    @precondition(lambda self: self.job.partitions < 4 * self.job.initial_processors + 4)
    @rule(data=st.data(), added=st.integers(1, 3), rounds=st.integers(1, 4))
    def split_then_add_processors(self, data, added, rounds):
        """The seed's order in one step, with the processors working between: write, split partitions, work while
        writing, add processors, work. Most of the interleavings worth checking (a new processor catching up on
        a split partition whose source it must drain) need this many steps."""
        self.produce(data, 3 * self.job.partitions)
        self.grow_partitions(added)
        for _ in range(rounds):
            self.work(data, 2, 3)
        self.grow_processors(data)
        for _ in range(rounds):
            self.work(data, 2, 3)

    @rule(data=st.data(), count=st.integers(1, 8))
    def read(self, data, count):
        """Up to `count` records of one partition by one processor, out of turn."""
        candidates = [(processor, partition) for processor in range(self.job.processors)
                      for partition in self.reads(processor) if self.unread(processor, partition)]
        if candidates:
            self.read_records(data, *data.draw(st.sampled_from(candidates)), count)

    @rule(data=st.data())
    def misstep(self, data):
        """One group or processor step out of turn, with arguments drawn: most are refused."""
        processor = data.draw(st.integers(0, self.job.processors - 1))
        partition = data.draw(st.integers(0, self.job.partitions - 1))
        offset = data.draw(st.sampled_from((self.position(processor, partition), self.job.committed.get(partition, 0),
                                            data.draw(st.integers(0, 8)))))
        action = data.draw(st.sampled_from(("assign", "release", "commit", "ready")))
        if action == "commit":
            self.attempt(self.job.commit, partition, offset, processor)
        elif action == "ready":
            self.attempt(self.job.ready, processor)
        elif action == "assign":  # to the right processor, so that what is tried is the offset
            self.attempt(self.job.assign, self.job.processor_of(partition), partition, offset)
        else:
            self.attempt(self.job.release, processor, partition, offset)

    def position(self, processor, partition):
        return self.job.positions.get(processor, {}).get(partition, 0)

    def unread(self, processor, partition):
        return self.position(processor, partition) < len((self.job.log or {}).get(partition, []))

    def read_records(self, data, processor, partition, count):
        for _ in range(count):
            if not self.unread(processor, partition):
                return
            offset = self.position(processor, partition)
            key = self.job.log[partition][offset]
            use = self.proposed_use(processor, partition, offset, key)
            if data.draw(st.integers(0, 9)) == 0:
                use = data.draw(st.sampled_from((PROCESS, REBUILD, SKIP)))
            if not self.attempt(self.job.read, processor, partition, offset, key, use):
                return
            self.check_drained(processor, partition, offset)
            self.read_to[processor][partition] = offset + 1
            if use != SKIP:
                self.applied[processor][key].append((partition, offset))
            if use == PROCESS:
                assert (partition, offset) not in self.output[key], f"EX-8/EX-11: {partition}:{offset} output twice"
                self.output[key].append((partition, offset))

    def written_to(self, partition):
        return [record for records in self.written.values() for record in records if record[0] == partition]

    def check_drained(self, processor, partition, offset):
        # EX-6: a record of a split partition is read only after its sources, up to where they were split.
        while partition in self.split_at:
            origin, split = self.split_at[partition]
            assert self.read_to[processor].get(origin, 0) >= split, \
                f"EX-6: processor {processor} read {partition}:{offset} with source {origin} read up to " \
                f"{self.read_to[processor].get(origin, 0)} of {split}"
            partition = origin

    def proposed_use(self, processor, partition, offset, key):
        start = self.job.output_from.get(processor, {}).get(partition)
        if start is not None and offset >= start:
            return PROCESS
        return REBUILD if self.job.processor_of(self.job.partition_of(key)) == processor else SKIP

    @rule(data=st.data())
    def commit(self, data):
        held = sorted(p for p, holder in self.job.holder.items() if holder is not None)
        if held:
            partition = data.draw(st.sampled_from(held))
            holder = self.job.holder[partition]
            self.attempt(self.job.commit, partition, self.position(holder, partition), holder)

    @precondition(lambda self: self.job.joining)
    @rule(data=st.data())
    def ready(self, data):
        self.attempt(self.job.ready, data.draw(st.sampled_from(sorted(self.job.joining))))

    @precondition(lambda self: self.job.ready_processors)
    @rule(data=st.data())
    def release(self, data):
        handed = sorted(p for n in self.job.ready_processors for p in self.job.joining[n]
                        if self.job.holder.get(p) is not None)
        if handed:
            partition = data.draw(st.sampled_from(handed))
            holder = self.job.holder[partition]
            self.attempt(self.job.release, holder, partition, self.position(holder, partition))

    @invariant()
    def never_more_processors_than_partitions(self):
        # EX-3
        assert self.job.processors <= self.job.partitions

    @invariant()
    def each_processor_applies_each_key_in_write_order(self):
        # EX-6, EX-7: per-key order across splits, none skipped, none twice.
        for processor, keys in self.applied.items():
            for key, records in keys.items():
                assert records == self.written[key][:len(records)], \
                    f"processor {processor} applied key {key} as {records}, written as {self.written[key]}"

    @invariant()
    def outputs_follow_write_order_once(self):
        # EX-8, EX-11: a key's outputs, over all processors, are a prefix of its records in write order.
        for key, records in self.output.items():
            assert records == self.written[key][:len(records)], \
                f"key {key} output as {records}, written as {self.written[key]}"

    @invariant()
    def output_starts_where_the_records_below_were_output(self):
        # EX-11: a holder outputs from its assigned offset; every record below it was output before (none lost).
        output = {record for records in self.output.values() for record in records}
        starts = {partition: start for held in self.job.output_from.values() for partition, start in held.items()}
        lost = [(partition, offset) for records in self.written.values() for partition, offset in records
                if offset < starts.get(partition, 0) and (partition, offset) not in output]
        assert not lost, f"outputs start at {starts}, but these records were never output: {sorted(lost)}"

    @invariant()
    def keys_only_at_their_own_processors(self):
        # EX-9: a processor applies a key only if the key was its own under some processor count the job had.
        for processor, keys in self.applied.items():
            for key in keys:
                partition = self.job.partition_of(key)
                owners = {linear_hash(partition, count, self.job.initial_processors) for count in self.counts}
                assert processor in owners, f"processor {processor} applied key {key} of processors {sorted(owners)}"


TestExpansionMachine = ExpansionMachine.TestCase
TestExpansionMachine.settings = settings.get_profile("kipcheck-machines")
