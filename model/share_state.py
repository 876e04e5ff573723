"""KIP-932 share coordinator: one share-partition's persisted state, its records, and replay (seed 002).

The coordinator keeps the state in memory and appends one record per accepted
request to its log. Under `kip` the records are the draft's ShareCheckpoint
(full state) and ShareDelta (one write); under `kafka-4.2` they are Kafka's
ShareSnapshot and ShareUpdate, here the same two classes `Checkpoint` and
`Delta`. `failover` rebuilds the state by replaying the log, so the invariant
"replay(log) == in-memory state" can be checked at any point. Every request
has one allowed answer, except COORDINATOR_LOAD_IN_PROGRESS while loading
(ST-13) and a storage error at any time (ST-18), both changing nothing.
Clause ids refer to spec/share-state.md.

Library API (pure):

    coordinator = ShareCoordinator(profile="kip")   # or "kafka-4.2", "kafka-4.4"; deltas_per_checkpoint=None
    coordinator.initialize(state_epoch, start_offset) -> Answer(error, clause)
    coordinator.write(state_epoch, start_offset, [Batch(first, last, state, delivery_count), ...]) -> Answer
    coordinator.read() -> Answer; when its error is "NONE" the answer is `coordinator.state`
    coordinator.ruled(field) -> the clause that decides `state_epoch`, `start_offset` or `batches`
    coordinator.failover()         # the coordinator restarts: state = replay(log)
    coordinator.still_loading()    # an observed COORDINATOR_LOAD_IN_PROGRESS: Violation unless loading
    coordinator.storage_failure(error)  # a request answered with one of STORAGE_ERRORS (ST-18, ST-13)
    coordinator.log() -> tuple of Checkpoint / Delta / Tombstone records
  the Kafka profiles only, the coordinator's own records (ST-30..ST-35):
    coordinator.advance(at_ms)     # the clock, read by cold-partition snapshots
    coordinator.initialize / write / read(..., leader_epoch=None)   # None: not given, not fenced
    coordinator.delete() -> Answer       # DeleteShareGroupState: a tombstone (ST-33)
    coordinator.cold_snapshot(shard_cold=True)   # the cold-partition job (ST-34)
    coordinator.prune()                  # records below the latest snapshot or tombstone deleted (ST-35)
    coordinator.appended -> "snapshot", "update", "tombstone" or "none": the last request's record (ST-31)
    replay(log, profile, deltas_per_checkpoint) -> PersistedState or None
    merge(batches, incoming, start_offset, profile) -> canonical batches
    canonical(batches) -> sorted batches with equal neighbours joined

States are named as in the trace format: available, acquired, acknowledged,
archived (and under kafka-4.4 archiving, Kafka 4.4's DeliveryState 3). Batches
are canonical when sorted, disjoint and coalesced (no two adjacent batches with
the same state and delivery count).

The coordinator is written as the draft's text. Where Apache Kafka 4.2 departs
from it (the clauses marked `profile: kafka-4.2`: its records, their replay,
its fencing and merge), the draft's rule is one member of `KipRules` and
Kafka's is the same member of `Kafka42Rules`, which extends it; where Kafka 4.4
departs from 4.2 (negative epochs refused, ST-40; a start offset that never
goes back, ST-41), `Kafka44Rules` extends `Kafka42Rules`. The coordinator asks
the rules of its profile. The draft has no trace steps for Kafka's own records
(ST-30; they are ST-31..ST-35).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, NamedTuple

from kipcheck.model.errors import Error
from kipcheck.model.profiles import KAFKA_42, KAFKA_44, KIP, PROFILES
from kipcheck.model.violation import STORAGE_ERRORS, Violation

# The persisted DeliveryState ids; Kafka orders equal delivery counts by them (ST-8). Only Kafka 4.4 has
# archiving (3): a record on its way to a dead-letter queue (spec/share-partition.md SP-73).
STATE_IDS = {"available": 0, "acquired": 1, "acknowledged": 2, "archiving": 3, "archived": 4}
# ST-9: DeltaIndex is a uint8, so one checkpoint epoch holds at most 256 deltas.
KIP_DELTAS_MAX = 256
# ST-10: share.coordinator.snapshot.update.records.per.snapshot.
KAFKA_UPDATES_PER_SNAPSHOT = 500
UNCHANGED = -1

# ST-31: what a request appended to the coordinator's log, as a trace observes it.
RECORD_KINDS = ("snapshot", "update", "tombstone", "none")
# ST-32: the leader epoch a snapshot of InitializeShareGroupState holds (Kafka's ShareGroupOffset.UNINITIALIZED_EPOCH).
INITIAL_LEADER_EPOCH = 0
# ST-34: share.coordinator.cold.partition.snapshot.interval.ms.
COLD_SNAPSHOT_INTERVAL_MS = 300000
FIELDS = ("state_epoch", "start_offset", "batches")


class Batch(NamedTuple):
    first: int
    last: int
    state: str
    delivery_count: int


class Answer(NamedTuple):
    error: str
    clause: str


@dataclass(frozen=True)
class PersistedState:
    state_epoch: int
    start_offset: int
    batches: tuple[Batch, ...]
    checkpoint_epoch: int
    # kip: ShareDelta records since the checkpoint, the next DeltaIndex.
    # kafka-4.2: Kafka's snapshotUpdateCount for the key.
    deltas: int = 0
    # ST-2: the highest state epoch of a checkpoint since the first, what Kafka fences against (its stateEpochMap);
    # the stored state_epoch can be lower after an initialize with -1.
    fence_epoch: int = 0
    leader_epoch: int = -1  # ST-32: the highest leader epoch recorded
    snapshot_at_ms: int = 0  # ST-34: when the last snapshot was written
    cold: bool = False  # ST-34: the last snapshot was a cold-partition snapshot


@dataclass(frozen=True)
class Checkpoint:
    """ShareCheckpoint (kip) or ShareSnapshot (kafka-4.2): the whole state."""

    checkpoint_epoch: int
    state_epoch: int
    start_offset: int
    batches: tuple[Batch, ...]
    leader_epoch: int = -1  # ST-32 (kafka-4.2)
    at_ms: int = 0  # ST-34: its write timestamp
    cold: bool = False  # ST-34: written by the cold-partition job


@dataclass(frozen=True)
class Tombstone:
    """ST-33 (kafka-4.2): DeleteShareGroupState's ShareSnapshot tombstone: the key has no state."""


@dataclass(frozen=True)
class Delta:
    """ShareDelta (kip) or ShareUpdate (kafka-4.2): one write; start_offset -1 means unchanged."""

    checkpoint_epoch: int
    state_epoch: int | None  # None under kafka-4.2: ShareUpdate has no StateEpoch
    delta_index: int | None  # None under kafka-4.2: no DeltaIndex
    start_offset: int
    batches: tuple[Batch, ...]
    leader_epoch: int = -1  # ST-32 (kafka-4.2): raised only by a read that writes


Record = Checkpoint | Delta | Tombstone


# Batches: merging offset by offset.

def canonical(batches: Iterable[Batch]) -> tuple[Batch, ...]:
    """Sorted, with equal neighbours joined: one spelling per state (batches must be disjoint)."""
    result: list[Batch] = []
    for batch in sorted(batches):
        previous = result[-1] if result else None
        if previous and previous.last + 1 == batch.first and previous[2:] == batch[2:]:
            result[-1] = previous._replace(last=batch.last)
        else:
            result.append(batch)
    return tuple(result)


def _split(batch: Batch, first: int, last: int) -> list[Batch]:
    """`batch` cut into pieces that each lie wholly inside or wholly outside [first, last]."""
    cuts = sorted({batch.first, batch.last + 1} | {cut for cut in (first, last + 1) if batch.first < cut <= batch.last})
    return [batch._replace(first=low, last=high - 1) for low, high in zip(cuts, cuts[1:])]


def _uncovered(batch: Batch, pieces: list[Batch]) -> list[Batch]:
    """The parts of `batch` that no piece (sorted, disjoint, inside it) covers."""
    parts, next_offset = [], batch.first
    for piece in pieces:
        if piece.first > next_offset:
            parts.append(batch._replace(first=next_offset, last=piece.first - 1))
        next_offset = piece.last + 1
    if next_offset <= batch.last:
        parts.append(batch._replace(first=next_offset))
    return parts


def _overlay(current: tuple[Batch, ...], batch: Batch, profile: str) -> tuple[Batch, ...]:
    pieces = [piece for old in current for piece in _split(old, batch.first, batch.last)]
    inside = [piece for piece in pieces if batch.first <= piece.first and piece.last <= batch.last]
    outside = [piece for piece in pieces if piece not in inside]
    kept = [piece for piece in inside if not RULES[profile].new_wins(batch, piece)]
    return canonical(outside + kept + _uncovered(batch, kept))


def _clip(batches: tuple[Batch, ...], start_offset: int) -> tuple[Batch, ...]:
    # ST-6: state below the start offset is discarded.
    return tuple(batch._replace(first=max(batch.first, start_offset)) for batch in batches if batch.last >= start_offset)


def merge(batches: Iterable[Batch], incoming: Iterable[Batch], start_offset: int, profile: str) -> tuple[Batch, ...]:
    """`incoming` written over `batches` in order (ST-7 or ST-8: `new_wins`), then clipped at `start_offset` (ST-6)."""
    result = canonical(batches)
    for batch in incoming:
        result = _overlay(result, batch, profile)
    return _clip(result, start_offset)


# Records: applying one, and replaying a log.

def _apply(state: PersistedState | None, record: Record, profile: str,
           deltas_per_checkpoint: int) -> PersistedState | None:
    """The state after `record`, as both the in-memory update and replay see it."""
    rules = RULES[profile]
    if isinstance(record, Tombstone):  # ST-33: the key's state, epochs and update count are gone
        return None
    if isinstance(record, Checkpoint):
        deltas = rules.deltas_after_checkpoint(state, deltas_per_checkpoint)  # ST-9, ST-10
        fence_epoch = record.state_epoch if state is None else max(state.fence_epoch, record.state_epoch)
        # ST-32: the recorded leader epoch only grows while the key lives.
        leader_epoch = max(record.leader_epoch, state.leader_epoch) if state is not None else record.leader_epoch
        return PersistedState(record.state_epoch, record.start_offset, record.batches, record.checkpoint_epoch, deltas,
                              fence_epoch, leader_epoch, record.at_ms, record.cold)
    assert state is not None, "a delta needs a checkpoint before it"
    if not rules.replays(state, record):  # ST-11: a delta of another checkpoint epoch
        return state
    # ST-6: -1 leaves the start offset unchanged.
    start_offset = state.start_offset if record.start_offset == UNCHANGED else record.start_offset
    deltas = rules.deltas_after_delta(state, record)  # ST-11: the next delta index; ST-12: the update count
    return replace(state, start_offset=start_offset, deltas=deltas, leader_epoch=max(state.leader_epoch, record.leader_epoch),
                   batches=merge(state.batches, record.batches, start_offset, profile))


def replay(log: Iterable[Record], profile: str, deltas_per_checkpoint: int | None = None) -> PersistedState | None:
    """The state a newly elected coordinator builds from `log` (ST-11, ST-12); None: never initialized."""
    limit = default_deltas_per_checkpoint(profile) if deltas_per_checkpoint is None else deltas_per_checkpoint
    state = None
    for record in RULES[profile].replayed(list(log)):  # ST-11: from the latest checkpoint; ST-12: all
        state = _apply(state, record, profile, limit)
    return state


def default_deltas_per_checkpoint(profile: str) -> int:
    return RULES[profile].deltas_default


@dataclass
class ShareCoordinator:
    profile: str = "kip"
    deltas_per_checkpoint: int | None = None
    state: PersistedState | None = None
    records: list[Record] = field(default_factory=list)
    # ST-13: the trace starts with a newly elected coordinator, as after a failover.
    loading: bool = True
    cold_snapshot_interval_ms: int = COLD_SNAPSHOT_INTERVAL_MS  # ST-34
    appended: str = "none"  # ST-31: the record the last request appended
    now_ms: int = 0  # ST-34: the clock, as advance() gave it
    # The clauses that name what a trace sees of the coordinator's own records: ST-10, or ST-35 for the
    # update count of a coordinator that replayed a pruned log; ST-3, or ST-33 for a deleted key.
    update_count_clause: str = "ST-10"
    _pruned: bool = field(default=False, init=False, repr=False)
    _deleted: bool = field(default=False, init=False, repr=False)
    _ruled: dict[str, str] = field(default_factory=lambda: dict.fromkeys(FIELDS, "ST-3"), init=False, repr=False)

    def __post_init__(self) -> None:
        assert self.profile in PROFILES, self.profile
        if self.deltas_per_checkpoint is None:
            self.deltas_per_checkpoint = default_deltas_per_checkpoint(self.profile)
        assert 0 <= self.deltas_per_checkpoint <= self.rules.deltas_max

    @property
    def rules(self) -> KipRules:
        """The rules where the profiles differ: the draft's, Kafka 4.2's over them, or Kafka 4.4's over those."""
        return RULES[self.profile]

    def log(self) -> tuple[Record, ...]:
        return tuple(self.records)

    def ruled(self, name: str) -> str:
        """The clause that decides the current value of `name` (a field of a read answer)."""
        return self._ruled[name]

    def still_loading(self) -> None:
        # ST-13: COORDINATOR_LOAD_IN_PROGRESS until the first other answer after a failover.
        if not self.loading:
            raise Violation("ST-13", "an answer other than COORDINATOR_LOAD_IN_PROGRESS (loading is over)",
                            Error.COORDINATOR_LOAD_IN_PROGRESS)
        self._ruled = dict.fromkeys(FIELDS, "ST-13")

    def storage_failure(self, error: str) -> None:
        """A request answered with `error`, one of STORAGE_ERRORS: it changed nothing."""
        assert error in STORAGE_ERRORS, error
        if error == Error.COORDINATOR_LOAD_IN_PROGRESS and (self.loading or not self.rules.load_error_for_failed_appends):
            # ST-13: this answer means loading (under kip, only loading).
            self.still_loading()
            return
        # ST-18: the coordinator could not append to or read its log. Loading goes on if it was going on.
        self._ruled = dict.fromkeys(FIELDS, "ST-18")

    def failover(self) -> None:
        # ST-11 / ST-12: the new coordinator's state is the replay of the log.
        self.state = replay(self.records, self.profile, self.deltas_per_checkpoint)
        self.update_count_clause = "ST-35" if self._pruned else "ST-10"
        self.loading = True
        self._ruled = dict.fromkeys(FIELDS, self.rules.replay_clause)

    def advance(self, at_ms: int) -> None:
        """The clock: ST-34 compares it with the time of the last snapshot."""
        self.now_ms = at_ms

    def read(self, leader_epoch: int | None = None) -> Answer:
        """`leader_epoch` (kafka-4.2; None: not given) fences the read and may make it write (ST-32)."""
        self.loading, self.appended = False, "none"
        refusal = self.rules.epochs_refusal(None, leader_epoch)
        if refusal:
            return self._refuse(*refusal)
        if self.state is None:
            # ST-3: no state before InitializeShareGroupState (ST-33: or after DeleteShareGroupState).
            return self._refuse(Error.INVALID_REQUEST, "ST-33" if self._deleted else "ST-3")
        if leader_epoch is not None:
            if self.state.leader_epoch > leader_epoch:
                # ST-32: a lower leader epoch is fenced; Kafka 4.2 fences -1 too (KAFKA-20694).
                return self._refuse(Error.FENCED_LEADER_EPOCH, "ST-32")
            if leader_epoch != UNCHANGED and leader_epoch != self.state.leader_epoch:
                # ST-32: a read with a new leader epoch records it, as a write of no batches would.
                self._append(self._record_for_write(self.state.state_epoch, self.state.start_offset, (), leader_epoch))
        # ST-1: the answer is the persisted state.
        return Answer(Error.NONE, "ST-1")

    def delete(self) -> Answer:
        """ST-33 (kafka-4.2): DeleteShareGroupState writes a tombstone, if the key has a state."""
        self.loading, self.appended = False, "none"
        if self.state is not None:
            self._append(Tombstone())
            self._deleted = True
        self._ruled = dict.fromkeys(FIELDS, "ST-33")
        return Answer(Error.NONE, "ST-33")

    def cold_snapshot(self, shard_cold: bool = True) -> None:
        """ST-34 (kafka-4.2): the cold-partition job snapshots a key whose last snapshot is older than the
        interval. It skips every key when every key of the coordinator's shard was last snapshotted by it; a
        trace sees one key, so `shard_cold` False says some other key of the shard was not, and then a key whose
        last snapshot was a cold one is snapshotted again."""
        self.appended = "none"
        state = self.state
        if state is None or self.now_ms - state.snapshot_at_ms < self.cold_snapshot_interval_ms:
            return
        if state.cold and shard_cold:
            return
        self._append(Checkpoint(state.checkpoint_epoch + 1, state.state_epoch, state.start_offset, state.batches,
                                state.leader_epoch, self.now_ms, cold=True))

    def prune(self) -> None:
        """ST-35 (kafka-4.2): the records before the latest snapshot or tombstone are deleted from the log."""
        latest = max((index for index, record in enumerate(self.records) if not isinstance(record, Delta)), default=0)
        del self.records[:latest]
        self._pruned = self._pruned or latest > 0

    def initialize(self, state_epoch: int, start_offset: int) -> Answer:
        self.loading, self.appended = False, "none"
        refusal = self.rules.initialize_refusal(self.state, state_epoch)
        if refusal:
            return self._refuse(*refusal)
        # ST-2: a checkpoint with the next checkpoint epoch replaces the whole state.
        checkpoint_epoch = 0 if self.state is None else self.state.checkpoint_epoch + 1
        self._append(Checkpoint(checkpoint_epoch, state_epoch, start_offset, (), self.rules.initial_leader_epoch,
                                self.now_ms))
        self._ruled = dict.fromkeys(FIELDS, "ST-2")
        return Answer(Error.NONE, "ST-2")

    def write(self, state_epoch: int, start_offset: int, batches: Iterable[Batch],
              leader_epoch: int | None = None) -> Answer:
        """`leader_epoch` (kafka-4.2; None: not given) fences the write (ST-32) and is never stored."""
        self.loading, self.appended = False, "none"
        batches = tuple(batches)
        refusal = self._write_refusal(state_epoch, batches, leader_epoch)
        if refusal:
            return self._refuse(*refusal)
        # ST-14: the coordinator stores the batches it is given, whatever the leader chose.
        self._append(self._record_for_write(state_epoch, start_offset, batches))
        self._ruled = {"state_epoch": self.rules.write_epoch_clause, "start_offset": self.rules.start_offset_clause,
                       "batches": self.rules.merge_clause}
        return Answer(Error.NONE, self._ruled["batches"])

    def _write_refusal(self, state_epoch: int, batches: tuple[Batch, ...],
                       leader_epoch: int | None) -> tuple[str, str] | None:
        refusal = self.rules.epochs_refusal(state_epoch, leader_epoch)
        if refusal:
            return refusal
        if self.state is None:
            # ST-3: a write before InitializeShareGroupState (ST-33: or after DeleteShareGroupState).
            return Error.INVALID_REQUEST, "ST-33" if self._deleted else "ST-3"
        return self.rules.write_refusal(self.state, state_epoch, batches, leader_epoch)

    def _record_for_write(self, state_epoch: int, start_offset: int, batches: tuple[Batch, ...],
                          leader_epoch: int | None = None) -> Record:
        state = self.state
        assert state is not None
        # ST-32: only a read that writes records a new leader epoch.
        leader_epoch = state.leader_epoch if leader_epoch is None else leader_epoch
        start_offset = self.rules.written_start_offset(state, start_offset)  # ST-6, ST-41
        if state.deltas < self.deltas_per_checkpoint:
            return self.rules.delta(state, state_epoch, start_offset, batches, leader_epoch)
        # ST-9 / ST-10: after the limit, a checkpoint with the next epoch holds the merged state.
        # ST-5: a write never changes the stored state epoch.
        new_start = state.start_offset if start_offset == UNCHANGED else start_offset
        merged = merge(state.batches, batches, new_start, self.profile)
        return Checkpoint(state.checkpoint_epoch + 1, state.state_epoch, new_start, merged, leader_epoch, self.now_ms)

    def _append(self, record: Record) -> None:
        self.records.append(record)
        # ST-31: which record the request appended.
        self.appended = "tombstone" if isinstance(record, Tombstone) else "snapshot" if isinstance(record, Checkpoint) else "update"
        if self.appended == "snapshot" and (self.state is None or self.state.deltas >= self.deltas_per_checkpoint):
            # A snapshot that resets the update count ends the effect of a pruned replay (ST-35).
            self.update_count_clause, self._pruned = "ST-10", False
        if isinstance(record, Checkpoint) and record.checkpoint_epoch == 0:
            self._deleted = False  # ST-33: initialized again
        self.state = _apply(self.state, record, self.profile, self.deltas_per_checkpoint)

    def _refuse(self, error: str, clause: str) -> Answer:
        # A refused request changes nothing: the state after it is ruled by the refusing clause.
        self._ruled = dict.fromkeys(FIELDS, clause)
        return Answer(error, clause)


class KipRules:
    """The draft's rules where Kafka 4.2 departs from them (the clauses marked `profile: kip`)."""

    deltas_max = KIP_DELTAS_MAX  # ST-9: DeltaIndex is a uint8
    deltas_default = KIP_DELTAS_MAX
    initial_leader_epoch = -1  # the draft's records have no leader epoch (ST-30)
    replay_clause = "ST-11"
    write_epoch_clause = "ST-4"
    start_offset_clause = "ST-6"
    merge_clause = "ST-7"
    # ST-13: COORDINATOR_LOAD_IN_PROGRESS means loading, and only loading.
    load_error_for_failed_appends = False
    states = ("available", "acquired", "acknowledged", "archived")  # the trace format's (ST-15: acquired refused)

    def epochs_refusal(self, state_epoch: int | None, leader_epoch: int | None) -> tuple[str, str] | None:
        """The refusal of a write's or read's epochs before the key is looked up (None: not in the request)."""
        return None  # checked against the stored state instead (ST-4, ST-5, ST-32)

    def written_start_offset(self, state: PersistedState, start_offset: int) -> int:
        """The start offset the record of a write holds (-1: unchanged)."""
        return start_offset  # ST-6: as the write gave it

    def new_wins(self, new: Batch, old: Batch) -> bool:
        """Whether a write's batch wins over the state of an offset it names."""
        # ST-7: a later write wins offset by offset.
        return True

    def initialize_refusal(self, state: PersistedState | None, state_epoch: int) -> tuple[str, str] | None:
        if state_epoch < 0:
            # ST-17: StateEpoch is a uint32 in the draft.
            return Error.INVALID_REQUEST, "ST-17"
        if state is not None and state.fence_epoch > state_epoch:
            # ST-2: an older state epoch is fenced.
            return Error.FENCED_STATE_EPOCH, "ST-2"
        return None

    def write_refusal(self, state: PersistedState, state_epoch: int, batches: tuple[Batch, ...],
                      leader_epoch: int | None) -> tuple[str, str] | None:
        if state_epoch != state.state_epoch:
            # ST-4: the state epoch must match.
            return Error.FENCED_STATE_EPOCH, "ST-4"
        if any(batch.state == "acquired" for batch in batches):
            # ST-15: Acquired is never persisted.
            return Error.INVALID_REQUEST, "ST-15"
        return None

    def delta(self, state: PersistedState, state_epoch: int, start_offset: int, batches: tuple[Batch, ...],
              leader_epoch: int) -> Delta:
        """The record of a write while the checkpoint takes more deltas."""
        # ST-9: a ShareDelta numbered in sequence, with the request's state epoch and batches.
        return Delta(state.checkpoint_epoch, state_epoch, state.deltas, start_offset, batches)

    def deltas_after_checkpoint(self, state: PersistedState | None, deltas_per_checkpoint: int) -> int:
        # ST-9: a checkpoint starts the delta index sequence again.
        return 0

    def replayed(self, log: list[Record]) -> list[Record]:
        """The records replay applies, in order."""
        # ST-11: the latest checkpoint, then the later deltas (whose checkpoint epoch matches: `replays`).
        checkpoints = [index for index, record in enumerate(log) if isinstance(record, Checkpoint)]
        return log[checkpoints[-1]:] if checkpoints else []

    def replays(self, state: PersistedState, delta: Delta) -> bool:
        # ST-11: a delta of another checkpoint epoch is not replayed.
        return delta.checkpoint_epoch == state.checkpoint_epoch

    def deltas_after_delta(self, state: PersistedState, delta: Delta) -> int:
        # ST-11: the delta index sequence continues after the highest index.
        return delta.delta_index + 1


class Kafka42Rules(KipRules):
    """What Apache Kafka 4.2's share coordinator does differently (the clauses marked `profile: kafka-4.2`),
    and why: its records are ShareSnapshot and ShareUpdate, replayed as written, and it fences by epochs
    it keeps rather than by equality."""

    deltas_max = 2**31 - 1
    deltas_default = KAFKA_UPDATES_PER_SNAPSHOT  # ST-10: share.coordinator.snapshot.update.records.per.snapshot
    initial_leader_epoch = INITIAL_LEADER_EPOCH  # ST-32: an initialize's snapshot holds leader epoch 0
    replay_clause = "ST-12"
    write_epoch_clause = "ST-5"
    merge_clause = "ST-8"
    # ST-18: Kafka 4.2 also answers COORDINATOR_LOAD_IN_PROGRESS for an append that failed.
    load_error_for_failed_appends = True

    def new_wins(self, new: Batch, old: Batch) -> bool:
        # ST-8: Kafka merges by PersisterStateBatchCombiner: the higher delivery count wins, then the
        # higher state id, whichever write came last.
        return (new.delivery_count, STATE_IDS[new.state]) >= (old.delivery_count, STATE_IDS[old.state])

    def initialize_refusal(self, state: PersistedState | None, state_epoch: int) -> tuple[str, str] | None:
        # ST-2: an older state epoch is fenced, but Kafka 4.2 does not fence -1 (nor refuse a negative
        # epoch: ST-17 is the draft's uint32).
        if state is not None and state.fence_epoch > state_epoch and state_epoch != UNCHANGED:
            return Error.FENCED_STATE_EPOCH, "ST-2"
        return None

    def write_refusal(self, state: PersistedState, state_epoch: int, batches: tuple[Batch, ...],
                      leader_epoch: int | None) -> tuple[str, str] | None:
        # ST-16: Kafka checks no batch state: Acquired is stored like any other.
        if leader_epoch not in (None, UNCHANGED) and state.leader_epoch > leader_epoch:
            # ST-32: a lower leader epoch is fenced, before the state epoch; -1 skips the check.
            return Error.FENCED_LEADER_EPOCH, "ST-32"
        if state_epoch != UNCHANGED and state.fence_epoch > state_epoch:
            # ST-5: only a higher stored state epoch fences a write; -1 skips the check.
            return Error.FENCED_STATE_EPOCH, "ST-5"
        return None

    def delta(self, state: PersistedState, state_epoch: int, start_offset: int, batches: tuple[Batch, ...],
              leader_epoch: int) -> Delta:
        # ST-10: a ShareUpdate has no StateEpoch and no DeltaIndex; its batches are merged among themselves.
        return Delta(state.checkpoint_epoch, None, None, start_offset, merge((), batches, UNCHANGED, KAFKA_42),
                     leader_epoch)

    def deltas_after_checkpoint(self, state: PersistedState | None, deltas_per_checkpoint: int) -> int:
        # ST-10: Kafka resets the update count only when it had reached the limit (a cold-partition
        # snapshot, ST-34, does not delay the next snapshot).
        return state.deltas if state is not None and state.deltas < deltas_per_checkpoint else 0

    def replayed(self, log: list[Record]) -> list[Record]:
        # ST-12: every record in order; a snapshot replaces, an update merges.
        return log

    def replays(self, state: PersistedState, delta: Delta) -> bool:
        return True  # ST-12: there is no epoch matching

    def deltas_after_delta(self, state: PersistedState, delta: Delta) -> int:
        # ST-12: Kafka counts the updates since the snapshot (ST-10).
        return state.deltas + 1


class Kafka44Rules(Kafka42Rules):
    """What Apache Kafka 4.4's share coordinator does differently from 4.2's (the clauses marked `profile:
    kafka-4.4` alone), and why: it treats no epoch as a sentinel any more (KAFKA-20743), and a late or
    reordered write no longer moves the start offset back (apache/kafka#23074). Its records and their replay
    are 4.2's; a record may hold the archiving state of a dead-letter queue (DeliveryState 3, ranked by ST-8)."""

    states = KipRules.states + ("archiving",)  # ST-16: stored as given, ranked between acknowledged and archived
    start_offset_clause = "ST-41"

    def epochs_refusal(self, state_epoch: int | None, leader_epoch: int | None) -> tuple[str, str] | None:
        # ST-40: a negative state or leader epoch is INVALID_REQUEST, before the key is looked up.
        if any(epoch is not None and epoch < 0 for epoch in (state_epoch, leader_epoch)):
            return Error.INVALID_REQUEST, "ST-40"
        return None

    def initialize_refusal(self, state: PersistedState | None, state_epoch: int) -> tuple[str, str] | None:
        # ST-40: a negative state epoch is refused; ST-2: an older one is fenced, -1 no longer excepted.
        refusal = self.epochs_refusal(state_epoch, None)
        if refusal is None and state is not None and state.fence_epoch > state_epoch:
            return Error.FENCED_STATE_EPOCH, "ST-2"
        return refusal

    def written_start_offset(self, state: PersistedState, start_offset: int) -> int:
        # ST-41: the higher of the write's and the stored start offset (-1, unchanged, is never higher).
        return max(start_offset, state.start_offset)


# The profiles, each a layer over the one before (model/profiles.py).
RULES = {KIP: KipRules(), KAFKA_42: Kafka42Rules(), KAFKA_44: Kafka44Rules()}
