"""impl/share against the models: drive the engine, record its own traces, judge them with the oracle.

Hypothesis drives the real engine (SharePartition + ShareSessionCache +
ShareCoordinator on a data dir) with a virtual clock through random
operations: several members, appends, acquires, acknowledgements of every type
(bad ones included), time jumps past lock deadlines, session requests with
right and wrong epochs, coordinator failovers, and (kafka-4.2) the log start offset
moving below, inside and past the window (DeleteRecords, SP-64, SP-66). The engine writes its traces
with TraceWriter; every trace must be allowed by the model of its machine
under the engine's profile. Deliberately broken partitions must be caught by
the same check.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.share.coordinator import ShareCoordinator
from kipcheck.impl.share.partition import ACKNOWLEDGED, ARCHIVED, COUNT, LOCK, STATE, SharePartition
from kipcheck.impl.share.sessions import ShareSessionCache
from kipcheck.impl.share.tracing import TraceWriter
from kipcheck.oracle.check import check_file

PROFILES = ("kip", "kafka-4.2")
GROUP, TOPIC_PARTITION = "g1", "orders:0"
KEY = f"{GROUP}:{TOPIC_PARTITION}"
MEMBERS = ("m1", "m2", "m3")


class Scenario:
    """One engine on a temporary data dir, driven by a random source, tracing everything."""

    def __init__(self, chooser: random.Random, profile: str, directory: Path, partition_class=SharePartition):
        self.chooser = chooser
        lock_ms = chooser.choice([50, 100])
        self.config = ShareConfig(
            record_lock_duration_ms=lock_ms, delivery_count_limit=chooser.choice([2, 3, 5]),
            max_inflight_records=chooser.choice([4, 12, 2000]), max_share_sessions=chooser.choice([2, 2000]),
            updates_per_snapshot=chooser.choice([2, 500]), auto_offset_reset="earliest", profile=profile)
        self.data_dir = directory / "data"
        self.writer = TraceWriter(directory / "traces", self.config)
        self.coordinator = ShareCoordinator(self.data_dir, self.config, fsync=False, trace_writer=self.writer)
        self.partition = partition_class.load(self.config, self.coordinator, KEY, 0, 0, 0, self.writer)
        self.sessions = ShareSessionCache(self.config, trace_writer=self.writer)
        self.epochs = dict.fromkeys(MEMBERS, 0)
        self.now_ms = 0
        self.log_start = 0

    def run(self, steps: int) -> list:
        operations = [self.append, self.acquire, self.acquire, self.acknowledge, self.acknowledge,
                      self.share_fetch, self.share_acknowledge, self.wait, self.failover]
        if self.config.profile == "kafka-4.2":   # kip has no log start movement (SP-60)
            operations.append(self.delete_records)
        for _ in range(steps):
            self.now_ms += self.chooser.choice([0, 0, 1, 7])
            self.chooser.choice(operations)()
            self.partition.trace_check(self.now_ms)
        self.sessions.trace_check(GROUP, self.now_ms)
        self.coordinator.read(KEY, self.now_ms)
        self.writer.close()
        return [check_file(path) for path in self.writer.paths()]

    def append(self) -> None:
        self.partition.on_append(self.partition.log_end_offset, self.chooser.randint(1, 5), self.now_ms)

    def delete_records(self) -> None:
        """The log start offset moves forward, to anywhere up to the log end (SP-64)."""
        self.log_start = self.chooser.randint(self.log_start, self.partition.log_end_offset)
        self.partition.on_log_start(self.log_start, self.now_ms)

    def acquire(self) -> None:
        # Kafka 4.2's record_limit acquire mode, now and then (SP-42).
        self.partition.acquire(self.chooser.choice(MEMBERS), self.chooser.randint(1, 8), self.now_ms,
                               record_limit=self.chooser.random() < 0.3, lock_duration_ms=self._group_lock_ms())

    def acknowledge(self) -> None:
        member = self.chooser.choice(MEMBERS)
        # Kafka 4.2's renewals, announced by the request (IsRenewAck) or not (SP-41).
        self.partition.acknowledge(member, self._batches(member), self.now_ms, renew=self.chooser.random() < 0.5,
                                   lock_duration_ms=self._group_lock_ms())

    def _group_lock_ms(self) -> int | None:
        """SP-46: now and then the group's lock duration differs from the broker's (None: the broker's)."""
        return self.chooser.choice([self.config.record_lock_duration_ms // 2, 3 * self.config.record_lock_duration_ms]) \
            if self.chooser.random() < 0.2 else None

    def _batches(self, member: str) -> list[tuple[int, int, str]]:
        types = ["accept", "release", "reject"] + (["gap"] if self.chooser.random() < 0.3 else []) \
            + (["renew"] * 2 if self.chooser.random() < 0.5 else [])
        held = self.partition.acquired_by(member)
        if held and self.chooser.random() < 0.7:
            first, last, _ = self.chooser.choice(held)
            middle = self.chooser.randint(first, last)
            return [(first, middle, self.chooser.choice(types))] + (
                [(middle + 1, last, self.chooser.choice(types))] if middle < last else [])
        batches, offset = [], max(0, self.partition.spso - 2) + self.chooser.randint(0, 3)
        for _ in range(self.chooser.randint(1, 3)):
            last = offset + self.chooser.randint(-1, 3)
            batches.append((offset, max(last, 0), self.chooser.choice(types)))
            offset = max(0, last + self.chooser.choice([0, 1, 1, 2]))
        return batches

    def share_fetch(self) -> None:
        member = self.chooser.choice(MEMBERS)
        epoch = self._epoch(member)
        acks = []
        if self.chooser.random() < 0.3:
            acks = [(TOPIC_PARTITION, first, last, "accept") for first, last, _ in self.partition.acquired_by(member)][:1]
        add = [TOPIC_PARTITION] if self.chooser.random() < 0.5 else []
        answer = self.sessions.share_fetch(GROUP, member, epoch, add=add, acks=acks, now_ms=self.now_ms)
        self._after_session_answer(member, answer, acks)

    def share_acknowledge(self) -> None:
        member = self.chooser.choice(MEMBERS)
        epoch = self._epoch(member)
        acks = [(TOPIC_PARTITION, first, last, "release") for first, last, _ in self.partition.acquired_by(member)][:1]
        answer = self.sessions.share_acknowledge(GROUP, member, epoch, acks=acks, now_ms=self.now_ms)
        self._after_session_answer(member, answer, acks)

    def _epoch(self, member: str) -> int:
        known = self.sessions.epoch_of(GROUP, member)
        right = known if known is not None else 0
        return self.chooser.choice([right, right, right, 0, -1, right + 1, -2])

    def _after_session_answer(self, member: str, answer, acks: list) -> None:
        if answer.process and acks:
            self.partition.acknowledge(member, [(first, last, kind) for _, first, last, kind in acks], self.now_ms)
        if answer.release and (answer.released is None or TOPIC_PARTITION in answer.released):
            self.partition.release_member(member, self.now_ms)

    def wait(self) -> None:
        lock_ms = self.config.record_lock_duration_ms
        self.now_ms += self.chooser.choice([10, lock_ms // 2, lock_ms, 2 * lock_ms])
        self.partition.expire_locks(self.now_ms)

    def failover(self) -> None:
        """The share coordinator restarts: drop it (no close, as after a crash) and replay its log."""
        if self.chooser.random() < 0.5:
            return
        self.coordinator = ShareCoordinator(self.data_dir, self.config, fsync=False, trace_writer=self.writer,
                                            now_ms=self.now_ms)
        self.partition.store = self.coordinator


def run_scenario(seed: int | random.Random, profile: str, steps: int = 60, partition_class=SharePartition) -> list:
    chooser = seed if isinstance(seed, random.Random) else random.Random(seed)
    with tempfile.TemporaryDirectory() as directory:
        return Scenario(chooser, profile, Path(directory), partition_class).run(steps)


def failures(verdicts: list) -> list[str]:
    return [verdict.summary() for verdict in verdicts if not verdict]


@pytest.mark.parametrize("profile", PROFILES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chooser=st.randoms(use_true_random=False))
def test_every_engine_trace_is_allowed_by_the_models(profile, chooser):
    verdicts = run_scenario(chooser, profile)
    machines = {verdict.machine for verdict in verdicts}
    assert {"share-partition", "share-session", "share-state"} <= machines
    assert not failures(verdicts)


# Mutants: each breaks one rule; the same differential check must catch it.

class ForgetsRedelivery(SharePartition):
    """A redelivered record keeps its old delivery count (SP-4 broken)."""

    def _acquire_cached(self, member_id, budget, lock_id, acquired, record_limit=False):
        start = len(acquired)
        budget = super()._acquire_cached(member_id, budget, lock_id, acquired, record_limit)
        for batch in self._batches:
            if batch[LOCK] == lock_id:
                batch[COUNT] -= 1
        acquired[start:] = [(first, last, count - 1) for first, last, count in acquired[start:]]
        return budget


class StartPassesAcquired(SharePartition):
    """SPSO moves past acquired records when the record after them is terminal (SP-23 broken)."""

    def _advance_start(self):
        super()._advance_start()
        if len(self._batches) > 1 and self._batches[1][STATE] in (ACKNOWLEDGED, ARCHIVED):
            del self._batches[:2]
            del self._firsts[:2]
            self._spso = self._batches[0][0] if self._batches else self._cache_end


class ArchivesWhatTheLogStartPasses(SharePartition):
    """The log start moving archives the acquired records it passes at once and moves SPSO on past the terminal
    records at the new start, as the reference broker did before it served SP-66 (SP-66 broken)."""

    def on_log_start(self, offset, now_ms):
        super().on_log_start(offset, now_ms)
        for batch in self._stranded:
            self._leave_acquired(batch, ARCHIVED)
        self._stranded, self._cached_below = [], None
        self._advance_start()


class IgnoresRenew(SharePartition):
    """A renewal answers NONE but leaves the lock as it was (SP-41 broken)."""

    def _renew(self, batches, now_ms, lock_duration_ms):
        pass


class IgnoresGroupLockDuration(SharePartition):
    """It reports the group's lock duration in its trace but arms the lock with the broker's (SP-46 broken)."""

    def _lock(self, lock_id, acquired, now_ms, lock_duration_ms):
        super()._lock(lock_id, acquired, now_ms, None)


class RecordLimitTakesWholeBatches(SharePartition):
    """record_limit acquires whole log batches, as batch_optimized does (SP-42 broken)."""

    def _acquire_cached(self, member_id, budget, lock_id, acquired, record_limit=False):
        return super()._acquire_cached(member_id, budget, lock_id, acquired)

    def _acquire_new(self, member_id, budget, room, lock_id, acquired, archived, record_limit=False):
        super()._acquire_new(member_id, budget, room, lock_id, acquired, archived)


class NeverThrottles(SharePartition):
    """Redelivery near the delivery limit is not throttled (SP-43 broken)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._throttle_from = 10**9


@pytest.mark.parametrize("profile, mutant, clauses", [
    *((profile, ForgetsRedelivery, {"SP-4", "SP-25"}) for profile in PROFILES),
    # SPSO judged by SP-23 (kafka-4.2: SP-66, where it moves only at a state write).
    *((profile, StartPassesAcquired, {"SP-23", "SP-66", "SP-25", "SP-3"}) for profile in PROFILES),
    # A record still locked delivered again (SP-3), or one whose group lock, shorter, should have expired (SP-20),
    # or a renewal under the group's lock duration found expired (SP-46).
    ("kafka-4.2", IgnoresRenew, {"SP-41", "SP-3", "SP-20", "SP-46"}),
    ("kafka-4.2", RecordLimitTakesWholeBatches, {"SP-42"}),
    ("kafka-4.2", NeverThrottles, {"SP-43"}),
    # SPSO past records the next write would not pass, or a stranded record's expiry not written (SP-47).
    ("kafka-4.2", ArchivesWhatTheLogStartPasses, {"SP-66", "SP-47"}),
    # A lock that expired too early (SP-46), or too late (SP-20), or a record still locked delivered again.
    *((profile, IgnoresGroupLockDuration, {"SP-46", "SP-20", "SP-3"}) for profile in PROFILES),
])
def test_a_broken_partition_is_caught(profile, mutant, clauses):
    for seed in range(200):
        broken = [verdict for verdict in run_scenario(seed, profile, partition_class=mutant)
                  if verdict.machine == "share-partition" and not verdict]
        if broken:
            assert broken[0].status == "violation" and broken[0].clause in clauses, broken[0].summary()
            return
    pytest.fail(f"{mutant.__name__} passed 200 scenarios under {profile}")


# The share coordinator alone: any writes a leader might send, not only the ones SharePartition sends.

def coordinator_scenario(chooser: random.Random, profile: str, directory: Path, steps: int = 40,
                         coordinator_class=ShareCoordinator) -> list:
    config = ShareConfig(updates_per_snapshot=chooser.choice([1, 3, 500]), profile=profile)
    writer = TraceWriter(directory / "traces", config)
    open_coordinator = lambda now_ms: coordinator_class(  # noqa: E731
        directory / "data", config, fsync=False, trace_writer=writer, now_ms=now_ms,
        compact_bytes=chooser.choice([512, 1 << 20]))
    coordinator = open_coordinator(0)
    for now_ms in range(steps):
        roll, epoch = chooser.random(), chooser.choice([-1, 0, 0, 1, 1, 2])
        if roll < 0.1:
            coordinator.initialize(KEY, epoch, chooser.randint(0, 5), now_ms)
        elif roll < 0.8:
            batches = []
            for _ in range(chooser.randint(0, 3)):
                first = chooser.randint(0, 12)
                batches.append((first, first + chooser.randint(0, 4), chooser.choice([0, 1, 2, 4]), chooser.randint(0, 3)))
            coordinator.write(KEY, epoch, chooser.choice([-1, -1, -1, chooser.randint(0, 8)]), batches, now_ms)
        elif roll < 0.9:
            coordinator.read(KEY, now_ms)
        else:
            coordinator = open_coordinator(now_ms)   # failover: the old object is dropped, as in a crash
    coordinator.read(KEY, steps)
    writer.close()
    return [check_file(path) for path in writer.paths()]


@pytest.mark.parametrize("profile", PROFILES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chooser=st.randoms(use_true_random=False))
def test_every_coordinator_trace_is_allowed_by_the_model(profile, chooser):
    with tempfile.TemporaryDirectory() as directory:
        verdicts = coordinator_scenario(chooser, profile, Path(directory))
    assert [verdict.machine for verdict in verdicts] == ["share-state"]
    assert not failures(verdicts)


class LosesUpdates(ShareCoordinator):
    """Answers NONE to a write whose update record never reaches the log (a lost write after failover)."""

    def _store(self, record):
        if record["type"] in ("ShareUpdate", "ShareDelta"):
            self._apply(record)
            return "NONE"
        return super()._store(record)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_coordinator_that_loses_writes_is_caught(profile):
    for seed in range(100):
        with tempfile.TemporaryDirectory() as directory:
            verdicts = coordinator_scenario(random.Random(seed), profile, Path(directory), coordinator_class=LosesUpdates)
        if not all(verdicts):
            assert verdicts[0].clause in {"ST-1", "ST-7", "ST-8", "ST-11", "ST-12"}, verdicts[0].summary()
            return
    pytest.fail(f"LosesUpdates passed 100 scenarios under {profile}")
