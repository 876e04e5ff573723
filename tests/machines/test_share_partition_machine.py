"""SP-1..SP-24: random appends, acquisitions, acknowledgements, lock expiry and leaves, under every profile.
The invariants are recomputed from the observable state and the test's own ledger. Under kip the test picks
any allowed acquisition; under kafka-4.2 (whole log batches, SP-6) it takes the model's lowest answer; under
kafka-4.4 the group has a dead-letter queue (SP-73, SP-74): rejected and exhausted records are archiving until
phase 2 archives them, at a step of its own."""

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kipcheck.model import share_partition as sp
from kipcheck.model.errors import Error

ACTORS = st.sampled_from(("c1", "c2", "c3"))
LIMIT, LOCK_MS, INFLIGHT_MAX = 2, 100, 12
TERMINAL = (sp.ACKNOWLEDGED, sp.ARCHIVED)  # SP-1


class SharePartitionMachine(RuleBasedStateMachine):
    PROFILE = "kip"
    OPTIONS: dict = {}  # further settings of the partition

    def __init__(self):
        super().__init__()
        self.partition = sp.SharePartition(delivery_count_limit=LIMIT, record_lock_duration_ms=LOCK_MS,
                                           max_inflight_records=INFLIGHT_MAX, profile=self.PROFILE, **self.OPTIONS)
        self.rejected = set()  # offsets the test saw rejected
        self.dead_lettered = set()  # offsets phase 2 archived (SP-74, kafka-4.4)
        self.now = 0
        self.deliveries = {}  # offset -> acquisitions the test applied (SP-4's delivery count)
        self.terminal = {}  # offset -> (state, count) once seen acknowledged or archived
        self.acquired_at = {}  # offset -> when the test last acquired it
        self.last_spso = 0

    def window(self):
        partition = self.partition
        return {offset: (partition.state_of(offset), partition.delivery_count_of(offset), partition.owner_of(offset))
                for offset in range(partition.spso, partition.speo)}

    def step(self, operation, finished_by_op=()):
        """Run one op; records SPSO passes must have been terminal, or been finished by the op itself."""
        spso, before = self.partition.spso, self.window()
        operation()
        for offset in range(spso, self.partition.spso):
            state, count, _ = before.get(offset, (sp.AVAILABLE, 0, None))
            at_limit = state == sp.ACQUIRED and count >= LIMIT
            assert state in TERMINAL or offset in finished_by_op or at_limit, (
                f"SP-23: SPSO {spso} -> {self.partition.spso} passed record {offset} ({state}, count {count})")

    @rule(count=st.integers(1, 6))
    def append(self, count):
        self.partition.append(count)

    def choose_acquisition(self, max_records, data):
        """SP-3: any ascending set of acquirable records, as observed runs [first, last, delivery_count]."""
        offsets = [o for first, last in self.partition.acquirable_ranges() for o in range(first, last + 1)]
        chosen = sorted(data.draw(st.sets(st.sampled_from(offsets), max_size=max_records))) if offsets else []
        speo, runs = self.partition.speo, []
        for offset in chosen:
            count = self.partition.delivery_count_of(offset) + 1 if offset < speo else 1
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, count])
        return chosen, runs

    @rule(actor=ACTORS, max_records=st.integers(1, 8), data=st.data())
    def acquire(self, actor, max_records, data):
        chosen, runs = self.choose_acquisition(max_records, data)
        self.step(lambda: self.partition.acquire(self.now, actor, max_records, runs))
        for offset in chosen:
            self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
            self.acquired_at[offset] = self.now
            assert self.partition.owner_of(offset) == actor, f"SP-4: record {offset} not owned by {actor}"
            deadline = self.partition.lock_deadline_of(offset)
            assert deadline == self.now + LOCK_MS, f"SP-4: record {offset} locked until {deadline}, not {self.now + LOCK_MS}"

    @precondition(lambda self: self.partition.speo > self.partition.spso)
    @rule(actor=ACTORS, kind=st.sampled_from(("accept", "release", "reject")), data=st.data())
    def acknowledge(self, actor, kind, data):
        partition = self.partition
        owned = [o for o in range(partition.spso, partition.speo) if partition.owner_of(o) == actor]
        if owned and data.draw(st.booleans()):
            first = data.draw(st.sampled_from(owned))
            last = first
            while last + 1 in owned and data.draw(st.booleans()):
                last += 1
        else:
            first = data.draw(st.integers(partition.spso, partition.speo - 1))
            last = data.draw(st.integers(first, partition.speo))
        before = self.window()
        answer = None

        def acknowledge():
            nonlocal answer
            answer = partition.acknowledge(self.now, actor, [(first, last, kind)])

        finished = range(first, last + 1) if kind != "release" else ()
        self.step(acknowledge, finished)
        mine = all(before.get(o, (None, 0, None))[2] == actor for o in range(first, last + 1))
        if mine and kind == "reject":
            self.rejected.update(range(first, last + 1))
        # SP-15: only the owner of every record in the batch may acknowledge it.
        assert (answer.value == Error.NONE) == mine, f"{answer.clause}: [{first}, {last}] by {actor} answered {answer.value}"
        if answer.value != Error.NONE:
            assert self.window() == before, f"{answer.clause}: a refused acknowledgement changed records"

    @rule(elapsed=st.integers(1, 2 * LOCK_MS))
    def tick(self, elapsed):
        self.now += elapsed
        self.step(lambda: self.partition.advance(self.now))

    @rule(actor=ACTORS)
    def leave(self, actor):
        self.step(lambda: self.partition.leave(self.now, actor))
        assert all(owner != actor for _, _, owner in self.window().values()), f"SP-22: {actor} still owns records"

    @invariant()
    def records_obey_the_rules(self):
        partition, spso = self.partition, self.partition.spso
        if self.PROFILE == "kip":  # SP-7 (Kafka 4.2 may overshoot to finish a log batch: SP-8)
            assert self.partition.speo - spso <= INFLIGHT_MAX, "SP-7: window past max_inflight_records"
        for offset, (state, count, owner) in self.window().items():
            # SP-4 / SP-20: acquired <=> one owner and a lock that has not expired.
            deadline = partition.lock_deadline_of(offset)
            assert (state == sp.ACQUIRED) == (owner is not None), f"SP-4: record {offset} {state} owner {owner}"
            assert state != sp.ACQUIRED or deadline > self.now, f"SP-20: record {offset} lock expired at {deadline}"
            expired = state == sp.ACQUIRED and self.acquired_at[offset] + LOCK_MS <= self.now
            assert not expired, f"SP-20: record {offset} acquired at {self.acquired_at[offset]} still locked at {self.now}"
            assert count == self.deliveries.get(offset, 0) <= LIMIT, f"SP-4/SP-21: record {offset} count {count}"
            if offset in self.terminal:  # SP-1: acknowledged and archived records never change again
                assert (state, count) == self.terminal[offset], f"SP-1: terminal record {offset} changed"
            elif state in TERMINAL:
                self.terminal[offset] = (state, count)
        # SP-23: SPSO stops at a non-terminal record (or SPEO)
        assert spso == partition.speo or partition.state_of(spso) not in TERMINAL, "SP-23: SPSO on a terminal record"
        assert spso >= self.last_spso, f"SP-23: SPSO went back from {self.last_spso} to {spso}"
        self.last_spso = spso


TestSharePartitionMachine = SharePartitionMachine.TestCase
TestSharePartitionMachine.settings = settings.get_profile("kipcheck-machines")


class KafkaSharePartitionMachine(SharePartitionMachine):
    PROFILE = "kafka-4.2"

    def choose_acquisition(self, max_records, data):
        """SP-6: the model's lowest answer (whole log batches past SPEO)."""
        runs = self.partition.lowest_acquisition(max_records)
        return [offset for first, last, _ in runs for offset in range(first, last + 1)], runs


TestKafkaSharePartitionMachine = KafkaSharePartitionMachine.TestCase
TestKafkaSharePartitionMachine.settings = settings.get_profile("kipcheck-machines")


class DeadLetterSharePartitionMachine(KafkaSharePartitionMachine):
    PROFILE = "kafka-4.4"
    OPTIONS = {"dead_letter_queue": True}

    @rule(data=st.data())
    def dead_letter(self, data):
        """SP-74: phase 2 finishes for part of a run of archiving records."""
        runs = self.partition.archiving_runs()
        if runs:
            first, last = data.draw(st.sampled_from(runs))
            last = data.draw(st.integers(first, last))
            self.step(lambda: self.partition.dead_lettered(first, last), range(first, last + 1))
            self.dead_lettered.update(range(first, last + 1))
            assert all(self.partition.state_of(offset) == sp.ARCHIVED for offset in range(max(first, self.partition.spso),
                                                                                           last + 1)), "SP-74"

    @invariant()
    def archiving_records_were_rejected_or_exhausted(self):
        for offset, (state, count, _) in self.window().items():
            # SP-73: a rejected record, or one that reached the limit, waits for phase 2 in archiving, never archived
            # before it (phase 2 is a step of its own, SP-74).
            if state == sp.ARCHIVING:
                assert offset in self.rejected or count >= LIMIT, f"SP-73: record {offset} archiving, count {count}"
            assert state != sp.ARCHIVED or offset in self.dead_lettered or offset not in self.rejected, (
                f"SP-73: rejected record {offset} archived without phase 2")


TestDeadLetterSharePartitionMachine = DeadLetterSharePartitionMachine.TestCase
TestDeadLetterSharePartitionMachine.settings = settings.get_profile("kipcheck-machines")
