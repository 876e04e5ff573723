"""SharePartition: the in-flight records of one share-partition (group, topic, partition), fast.

The real counterpart of model/share_partition.py. State is kept as in-flight
BATCHES (runs of offsets with one state, delivery count, owner and lock), split
only where an operation needs a boundary, never one object per record; locks
expire through one ordered queue, so the broker arms a single timer.

API (all times are the caller's clock in ms, never decreasing per partition):

    partition = SharePartition(config, start_offset=0, trace=None)     # in memory
    partition = SharePartition.load(config, coordinator, key, log_start_offset, log_end_offset,
                                    now_ms, trace_writer=None)
        Durable: reads the key's state from the share coordinator, or initializes
        it at the log end (share.auto.offset.reset=latest) or start (earliest);
        an initialization the coordinator refuses raises PersisterError (its
        `error` as the share-partition leader answers it, e.g. COORDINATOR_NOT_AVAILABLE).
        Then call on_append for the log's batches from partition.log_end_offset on.

    partition.on_append(base_offset, count, now_ms, transaction=None)   # a produced batch landed in the log
        Offsets already known are ignored (so a broker may replay its whole log
        after load); a base past the known log end raises ValueError.
        transaction: (producer id, None) for transactional data, (producer id,
        0 abort or 1 commit) for a transaction marker (kafka-4.2: spec SP-61).
        Under share.isolation.level=read_committed, acquisition stops at the
        last stable offset (SP-62) and the new records of aborted transactions
        are acquired and archived at once, count 1, not returned (SP-63).
    partition.on_log_start(offset, now_ms)   # kafka-4.2: the log start offset moved (DeleteRecords): SPSO jumps
        to it (spec SP-64); records acquired below it stay acquired there, out of the window, until their lock
        expires or their member's session ends (then archived, and written), and hold SPSO where it is (SP-66).
    partition.acquire(member_id, max_records, now_ms) -> list[(first, last, delivery_count)]
        Ascending, one entry per contiguous run of equal delivery count; [] if
        nothing is acquirable (or max_records < 1, which is not traced). kafka-4.2 acquires whole log batches (max_records
        is a soft limit, as Kafka's batch_optimized mode); kip stops at exactly
        max_records. New records enter only while in-flight (speo - spso) is
        below max_inflight_records (kafka-4.2 rounds up to the batch end).
        `lock_duration_ms` (keyword, default the config's): the group's lock
        duration now, read at each acquisition and renewal (spec SP-46).
    partition.acknowledge(member_id, [(first, last, ack_type), ...], now_ms, renew=False) -> error name
        ack_type: "accept", "release", "reject", or "gap" and "renew" (kafka-4.2 only;
        renew needs `renew=True`, the request's IsRenewAck, else INVALID_REQUEST).
        A renewal restarts the lock of records the member holds and persists
        nothing; it takes effect at once, so the renewals before a failing batch,
        or in a request whose write fails, stand (spec SP-41).
        Atomic per request: "NONE" and every batch applied, or an error and
        nothing applied. INVALID_REQUEST: unknown type, first > last, batches
        overlapping the previous batch (kip: or sharing its last offset). Then
        batch by batch, the first failing one decides (spec SP-10..SP-19):
        a batch reaching speo is INVALID_REQUEST (kafka-4.2: INVALID_RECORD_STATE
        when the window is empty); kafka-4.2 ignores offsets below spso and
        answers INVALID_RECORD_STATE for a batch starting on the previous
        batch's last offset (unless that offset is below spso); kip answers
        INVALID_RECORD_STATE below spso. A batch straddling spso of an empty
        window is INVALID_RECORD_STATE, where Kafka 4.2 fails the whole request
        (spec SP-40; traces say `straddle_npe: flag`).
        INVALID_RECORD_STATE: a record not ACQUIRED by this member (acknowledged,
        held by another member, expired); kip answers REQUEST_TIMED_OUT when the
        first such record is AVAILABLE because this member's own lock expired.
        A persistence failure rolls nothing forward and answers its error.
        Negative offsets or an unknown type: INVALID_REQUEST, not traced (a
        trace cannot hold them). ACK_TYPES_BY_WIRE maps the wire's type codes.
    partition.release_member(member_id, now_ms) -> int   # session closed / member left:
        its ACQUIRED records become AVAILABLE (ARCHIVED at the delivery limit),
        delivery count kept (Kafka 4.2, KAFKA-19972). Returns records released.
    partition.expire_locks(now_ms) -> int      # locks with deadline <= now_ms; same transition
    partition.next_deadline_ms() -> int | None # earliest live lock deadline: arm one timer
    partition.spso, partition.speo             # start offset; exclusive end of the in-flight window
    partition.log_end_offset                   # end of the log as far as on_append told it
    partition.states() -> list[(first, last, state_name, delivery_count)]   # [spso, speo)
    partition.acquired_by(member_id) -> list[(first, last, delivery_count)]
    partition.trace_check(now_ms)              # write a `check` step to the trace, if traced
    partition.store = coordinator              # after a coordinator failover: the new coordinator

Every public operation first expires the locks whose deadline is <= now_ms,
as the trace format's timers fire before a step's own op.

SPSO (spec SP-23): kip moves it past terminal records after every step;
kafka-4.2 moves it as Kafka 4.2 does (SP-66): once a state write completes
(an acknowledgement, a release, a lock expiry), when the log start offset
moves (to it), and never past records it archived at acquisition (SP-63)
until the next write.

Traces: with `trace=` (or `load(..., trace_writer=)`) every operation is a
share-partition step (append by actor "log"; acquire, acknowledge, leave by
the member; check). A partition loaded with persisted in-flight records starts
its trace with them as `config.initial_state` (spec SP-26). Mutation tests subclass
`_acquire_cached` and `_advance_start` and read `_batches` with the FIRST..EXPIRED
indices: keep those names stable.

Delivery count: incremented on acquisition (the returned count is the new
one). Release, lock expiry and member leave at count >= delivery_count_limit
archive the record instead of making it available. kafka-4.2 throttles
redelivery as Kafka 4.2 does (spec SP-43): records delivered max(2,
ceil(limit / 2)) times or more are acquired only first in a fetch, half as
many per extra delivery, alone on their last delivery, and nothing follows
them in that fetch.

Durability (when built by `load` with a coordinator): every transition out of
ACQUIRED (acknowledge, release, lock expiry, member leave) is written to the
share coordinator before the call returns, with the current SPSO and only the
records that changed. The coordinator fsyncs before answering, so an
acknowledged or archived record is never delivered again after kill -9.
An acknowledgement is written before it is applied (a failed write changes
nothing); expiry and release are applied even if the write fails, as in Kafka.
ACQUIRED is never persisted: after a restart a record that was acquired and
not yet acknowledged is AVAILABLE again with the delivery count of its last
persisted transition (0 if it never had one, so its next delivery counts 1),
i.e. an acquisition whose outcome was not persisted is not counted. Offsets
between persisted batches (never transitioned) come back AVAILABLE with count 0.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from heapq import heappop, heappush
from typing import Iterable, Protocol

from kipcheck.impl.share.config import ShareConfig
from kipcheck.model.errors import Error
from kipcheck.model.share_partition_log import LogFacts

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4   # SP-1: a record's states, as Kafka's RecordState ids
STATE_NAMES = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}
STATE_IDS = {name: state for state, name in STATE_NAMES.items()}
ACK_TYPES_BY_WIRE = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}   # ShareFetch/ShareAcknowledge
# SP-9: what each type does (gap: SP-12); renew (kafka-4.2, spec SP-41) keeps the records acquired and restarts
# their lock.
_ACK_TARGETS = {"accept": ACKNOWLEDGED, "reject": ARCHIVED, "gap": ARCHIVED, "release": AVAILABLE, "renew": ACQUIRED}
_PROFILE_ACK_TYPES = {"kafka-4.2": frozenset(_ACK_TARGETS), "kip": frozenset({"accept", "release", "reject"})}

# One in-flight batch is a list: [first, last, state, delivery_count, member_id, lock_id, expired_owner].
# expired_owner: whose lock expired on these records (kip answers that member REQUEST_TIMED_OUT);
# set on expiry, cleared on the next acquisition.
FIRST, LAST, STATE, COUNT, MEMBER, LOCK, EXPIRED = range(7)
NO_LOCK = 0
NO_START_OFFSET = -1   # a share state initialized without a start offset (Kafka's group coordinator, ST-2)


class PersisterError(Exception):
    """The share coordinator refused to initialize a share-partition; `error` is the leader's answer."""

    def __init__(self, key: str, error: str):
        super().__init__(f"cannot initialize share state of {key}: {error}")
        self.error = error


class StateStore(Protocol):
    """What a SharePartition needs from the share coordinator (see coordinator.ShareCoordinator)."""

    def write(self, key: str, state_epoch: int, start_offset: int,
              batches: list[tuple[int, int, int, int]], now_ms: int) -> str: ...


class PartitionTrace(Protocol):
    """Where a SharePartition reports its steps (see tracing.TraceWriter.partition)."""

    def step(self, at_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None: ...


class SharePartition:
    trace_state = False  # with a trace: a `check` after every step (the broker's --trace-state)

    def __init__(self, config: ShareConfig, start_offset: int = 0, *, store: StateStore | None = None,
                 key: str = "", state_epoch: int = 0, trace: PartitionTrace | None = None) -> None:
        if start_offset < 0:
            raise ValueError(f"start_offset must be >= 0, found {start_offset}")
        self.config = config
        self.key = key
        self.state_epoch = state_epoch
        self.store = store
        self._trace = trace
        self._whole_batches = config.profile == "kafka-4.2"
        # SP-61..SP-63: the log's transactions, as the model reads them (Kafka 4.2 only).
        self._transactions = LogFacts(config.isolation_level, config.profile)
        self._ack_types = _PROFILE_ACK_TYPES[config.profile]
        # Kafka 4.2 throttles redelivery from this delivery count on (SharePartition.throttleRecordsDeliveryLimit).
        self._throttle_from = max(2, -(-config.delivery_count_limit // 2))
        self._spso = start_offset
        self._cache_end = start_offset          # exclusive end of the cached window (the trace's speo)
        self._log_end = start_offset            # exclusive end of the log as far as we know it
        self._batches: list[list] = []          # cached batches, ascending, covering [spso, cache_end)
        self._firsts: list[int] = []            # their first offsets, for bisect
        self._log_batches: deque[list[int]] = deque()   # [first, last] of log batches at/after cache_end
        self._available_records = 0             # AVAILABLE records in the cache
        # SP-66 (kafka-4.2): what Kafka's cache still holds below SPSO once the log start moved past it: the
        # batches left acquired there (locked, owned), and the offset after the highest record cached below
        # SPSO (None: none). Neither is in the window.
        self._stranded: list[list] = []
        self._cached_below: int | None = None
        self._log_start = 0                     # the log start offset as far as on_log_start told it
        # (deadline_ms, lock_id) as a heap: a group's lock duration may change (SP-46), so a later
        # lock may expire first.
        self._locks: list[tuple[int, int]] = []
        self._lock_records: dict[int, int] = {}         # live lock_id -> records it still holds
        self._lock_ranges: dict[int, tuple[int, int]] = {}
        self._next_lock_id = 1
        self._clock_ms = 0

    # -- construction from persisted state ------------------------------------------------

    @classmethod
    def load(cls, config: ShareConfig, coordinator, key: str, log_start_offset: int, log_end_offset: int,
             now_ms: int, trace_writer=None, reset_offset: int | None = None) -> "SharePartition":
        """Read the persisted state of `key` from `coordinator`, initializing it on first use.

        A new share-partition starts at the log end (share.auto.offset.reset=latest)
        or the log start (earliest), or at `reset_offset` when the caller gives
        it (by_duration: the first offset of the records that recent); a persisted
        start offset always wins. Under `kip` the initialization stores that start
        offset; under Kafka's profiles it stores -1 (no start offset, as Kafka's
        group coordinator initializes a subscribed share-partition) and the reset
        applies in memory until the first write carries SPSO (spec ST-2).
        `trace_writer` (a tracing.TraceWriter) gets a share-partition trace for
        this incarnation, headed by the loaded SPSO and in-flight records (config
        start_offset and initial_state, spec SP-26).
        """
        if reset_offset is None:
            reset_offset = log_end_offset if config.auto_offset_reset == "latest" else log_start_offset
        error, state_epoch, start_offset, batches = coordinator.read(key, now_ms)
        if error != Error.NONE:
            state_epoch, batches = 0, []
            start_offset = reset_offset if config.profile == "kip" else NO_START_OFFSET
            error = persister_answer(coordinator.initialize(key, state_epoch, start_offset, now_ms))
            if error != Error.NONE:
                raise PersisterError(key, error)
        if start_offset == NO_START_OFFSET:
            start_offset = reset_offset   # ST-2: Kafka's SharePartition startOffsetDuringInitialization
        start_offset = max(start_offset, log_start_offset)
        partition = cls(config, start_offset, store=coordinator, key=key, state_epoch=state_epoch)
        partition._log_start = log_start_offset
        partition._restore(batches)
        if trace_writer is not None:
            partition._trace = trace_writer.partition(key, config, partition._spso, partition.states())
        partition._clock_ms = now_ms
        return partition

    def _restore(self, batches: Iterable[tuple[int, int, int, int]]) -> None:
        """XM-1: rebuild the cache from persisted (first, last, state, count): holes become AVAILABLE, count 0."""
        position = self._spso
        for first, last, state, count in sorted(batches):
            first = max(first, position)
            if last < first:
                continue
            if first > position:
                self._insert_new(position, first - 1, AVAILABLE, 0)
            self._insert_new(first, last, state if state != ACQUIRED else AVAILABLE, count)
            position = last + 1
        self._cache_end = self._log_end = position
        self._advance_start()

    def _insert_new(self, first: int, last: int, state: int, count: int) -> None:
        self._batches.append([first, last, state, count, None, NO_LOCK, None])
        self._firsts.append(first)
        if state == AVAILABLE:
            self._available_records += last - first + 1

    # -- queries ---------------------------------------------------------------------------

    @property
    def straddle_npe(self) -> str:
        """SP-40's trace setting for this engine: "flag" where it answers INVALID_RECORD_STATE for Kafka's failure."""
        return self.config.trace_config(self.spso).get("straddle_npe", "accept")

    @property
    def spso(self) -> int:
        return self._spso

    @property
    def speo(self) -> int:
        """Exclusive end of the in-flight window (the trace format's SPEO)."""
        return self._cache_end

    @property
    def log_end_offset(self) -> int:
        return self._log_end

    def states(self) -> list[tuple[int, int, str, int]]:
        """The in-flight window [spso, speo) as (first, last, state name, delivery count) runs."""
        return [(batch[FIRST], batch[LAST], STATE_NAMES[batch[STATE]], batch[COUNT]) for batch in self._batches]

    def acquired_by(self, member_id: str) -> list[tuple[int, int, int]]:
        """(first, last, delivery_count) of the records `member_id` holds now."""
        return [(batch[FIRST], batch[LAST], batch[COUNT]) for batch in self._batches
                if batch[STATE] == ACQUIRED and batch[MEMBER] == member_id]

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of a lock that still holds records, or None."""
        locks = self._locks
        while locks and locks[0][1] not in self._lock_records:
            heappop(locks)
        return locks[0][0] if locks else None

    # -- log -------------------------------------------------------------------------------

    def on_append(self, base_offset: int, count: int, now_ms: int,
                  transaction: tuple[int, int | None] | None = None) -> None:
        """A batch of `count` records at `base_offset` landed in the log (transaction: see the module docstring)."""
        if count < 1:
            raise ValueError(f"an appended batch needs count >= 1, found {count}")
        if base_offset > self._log_end:
            raise ValueError(f"append at {base_offset} leaves a hole after log end {self._log_end}")
        self._tick(now_ms)
        last = base_offset + count - 1
        if last < self._log_end:
            return
        first = self._log_end
        self._log_batches.append([first, last])   # SP-2: available from now on, delivery count 0
        self._log_end = last + 1
        if transaction is None or not self._whole_batches:  # kip has no transactions (SP-60)
            self._record(now_ms, "log", "append", {"count": last - first + 1})
            return
        producer, control_type = str(transaction[0]), transaction[1]
        if control_type is None:  # SP-61: transactional data opens or extends the producer's transaction
            self._transactions.append(first, last - first + 1, producer)
            self._record(now_ms, "log", "append", {"count": last - first + 1, "producer": producer})
        elif self._transactions.has_open_transaction(producer):  # SP-61: its marker ends it
            result = "commit" if control_type == 1 else "abort"
            self._transactions.end_transaction(producer, result)
            self._record(now_ms, "log", "end_transaction", {"producer": producer, "result": result})
        else:  # the marker of a transaction whose data this share-partition never read (below its start)
            self._record(now_ms, "log", "append", {"count": 1})

    def on_log_start(self, offset: int, now_ms: int) -> None:
        """The log start offset moved to `offset` (kafka-4.2, spec SP-64): SPSO becomes it, whatever the record
        there, and moves on only at the next write (SP-66). The records below leave the window: available ones
        as Kafka archives them; acquired ones stay acquired below SPSO (SP-66), skipped by an acknowledgement
        (SP-18), never delivered again, holding SPSO back until their lock expires or their member's session
        ends. Nothing is written until the next write, which carries the new SPSO."""
        self._tick(now_ms)
        if not self._whole_batches:
            return  # kip has no log start movement (SP-60): the broker serves DeleteRecords only under kafka-4.2
        self._record(now_ms, "log", "log_start", {"offset": offset})
        self._log_start = max(self._log_start, offset)
        if offset <= self._spso:
            return   # Kafka ignores a log start offset at or below SPSO
        if self._spso < self._cache_end:   # SP-66: Kafka's cache keeps what it held below the new SPSO
            self._cached_below = max(self._cached_below or 0, min(offset, self._cache_end))
        gone = 0
        while gone < len(self._batches) and self._batches[gone][FIRST] < offset:
            batch = self._batches[gone]
            if batch[LAST] >= offset:
                self._split_after(gone, offset - 1)
            if batch[STATE] == ACQUIRED:
                self._stranded.append(batch)   # SP-66: acquired below SPSO until its lock or session ends
            elif batch[STATE] == AVAILABLE:
                self._available_records -= batch[LAST] - batch[FIRST] + 1
            gone += 1
        del self._batches[:gone]
        del self._firsts[:gone]
        while self._log_batches and self._log_batches[0][1] < offset:
            self._log_batches.popleft()   # a batch the new start cuts stays whole: see _acquire_below_start
        self._cache_end = max(self._cache_end, offset)
        self._spso = offset

    # -- acquire ---------------------------------------------------------------------------

    def acquire(self, member_id: str, max_records: int, now_ms: int, record_limit: bool = False,
                lock_duration_ms: int | None = None) -> list[tuple[int, int, int]]:
        """Acquire up to max_records (soft under kafka-4.2) for member_id; see the module docstring.
        `record_limit`: Kafka 4.2's record_limit acquire mode (kafka-4.2 only). `lock_duration_ms`: the
        group's lock duration now (SP-46; None: the config's)."""
        self._tick(now_ms)
        if max_records < 1:
            return []   # nothing asked; not a step a trace can hold (max_records >= 1)
        record_limit = record_limit and self._whole_batches
        lock_id = self._next_lock_id
        acquired: list[tuple[int, int, int]] = []
        budget = self._acquire_cached(member_id, max_records, lock_id, acquired, record_limit)
        room = self.config.max_inflight_records - (self._cache_end - self._spso)   # SP-7 (kip)
        if self._whole_batches:
            # Kafka 4.2 (SP-6, SP-8): re-acquired records use up the in-flight room too.
            budget = room = min(max_records, room) - (max_records - budget)
        if self._cache_end < self._log_start:
            # SP-66: SPSO went back below the log start (see _advance_start); Kafka's fetch from there is answered
            # OFFSET_OUT_OF_RANGE inside, acquires nothing and puts SPSO and SPEO at the log start again.
            self._spso = self._cache_end = self._log_start
            budget = 0
        # SP-63: records archived at acquisition stay in the window until the next write moves SPSO (SP-66).
        archived: list[list[int]] = []
        if budget > 0 and room > 0:
            self._acquire_new(member_id, budget, room, lock_id, acquired, archived, record_limit)
        if acquired:
            self._lock(lock_id, acquired, now_ms, lock_duration_ms)
        records = _coalesce(acquired)
        args: dict = {"max_records": max_records}
        if record_limit:
            args["acquire_mode"] = "record_limit"
        self._trace_lock_duration(args, lock_duration_ms)
        observed: dict = {"records": [list(run) for run in records]}
        if self._transactions.read_committed:
            observed["archived"] = archived
        self._record(now_ms, member_id, "acquire", args, observed)
        return records

    def _lock(self, lock_id: int, acquired: list[tuple[int, int, int]], now_ms: int,
              lock_duration_ms: int | None) -> None:
        """One lock for everything one acquisition or renewal took, for the lock duration in force (SP-46)."""
        self._next_lock_id += 1
        self._lock_records[lock_id] = sum(last - first + 1 for first, last, _ in acquired)
        self._lock_ranges[lock_id] = (acquired[0][0], acquired[-1][1])
        duration_ms = self.config.record_lock_duration_ms if lock_duration_ms is None else lock_duration_ms
        heappush(self._locks, (now_ms + duration_ms, lock_id))

    def _trace_lock_duration(self, args: dict, lock_duration_ms: int | None) -> None:
        """SP-46: a step names its lock duration when it is not the trace header's."""
        if lock_duration_ms is not None and lock_duration_ms != self.config.record_lock_duration_ms:
            args["lock_duration_ms"] = lock_duration_ms

    def _acquire_cached(self, member_id: str, budget: int, lock_id: int, acquired: list,
                        record_limit: bool = False) -> int:
        if self._available_records == 0:
            return budget
        index, taken = 0, len(acquired)
        while index < len(self._batches) and budget > 0 and self._available_records > 0:
            batch = self._batches[index]
            if batch[STATE] == AVAILABLE:   # SP-3: only available records, ascending
                size = batch[LAST] - batch[FIRST] + 1
                if self._whole_batches and batch[COUNT] >= self._throttle_from:
                    # Kafka 4.2 throttles redelivery near the delivery limit: such records come first or not at
                    # all, half as many per extra delivery, one alone on its last; nothing else, nothing new.
                    if len(acquired) > taken:
                        return 0
                    last_attempt = 2 < self.config.delivery_count_limit == batch[COUNT] + 1
                    size = 1 if last_attempt else max(1, size >> (batch[COUNT] - self._throttle_from + 1))
                    self._acquire_batch(index, min(size, budget) if record_limit else size, member_id, lock_id,
                                        acquired)
                    return 0
                if (not self._whole_batches or record_limit) and size > budget:   # SP-5 (kip): max_records at most
                    size = budget
                self._acquire_batch(index, size, member_id, lock_id, acquired)
                budget -= size
            index += 1
        return budget

    def _acquire_batch(self, index: int, size: int, member_id: str, lock_id: int, acquired: list) -> None:
        """Acquire the first `size` records of the AVAILABLE cached batch `index` (split off the rest)."""
        batch = self._batches[index]
        if batch[LAST] - batch[FIRST] + 1 > size:
            self._split_after(index, batch[FIRST] + size - 1)
        self._available_records -= size
        # SP-4: acquired, owned and locked, its delivery count one higher
        batch[STATE], batch[COUNT], batch[MEMBER], batch[LOCK] = ACQUIRED, batch[COUNT] + 1, member_id, lock_id
        batch[EXPIRED] = None
        acquired.append((batch[FIRST], batch[LAST], batch[COUNT]))

    def _acquire_new(self, member_id: str, budget: int, room: int, lock_id: int, acquired: list,
                     archived: list, record_limit: bool = False) -> None:
        log_batches = self._log_batches
        transactions = self._transactions
        # SP-62: read_committed reads below the last stable offset (Kafka 4.2 reads whole batches).
        stable = transactions.last_stable_offset(self._log_end) if transactions.read_committed else self._log_end
        while budget > 0 and room > 0 and log_batches and log_batches[0][1] < stable:
            first, last = log_batches[0]
            if first < self._cache_end:   # SP-64: a batch the log start offset cut
                below = self._acquire_below_start(first, last, member_id, lock_id, acquired,
                                                  record_limit or budget <= self._spso - first)
                budget, room = budget - below, room - below   # they count, as Kafka counts them
                first = log_batches[0][0] = self._cache_end
            if transactions.aborted_in(first, last):  # SP-63: a data batch of an aborted transaction
                log_batches.popleft()
                self._batches.append([first, last, ARCHIVED, 1, None, NO_LOCK, None])
                self._firsts.append(first)
                self._cache_end = last + 1
                archived.append([first, last])
                budget -= last - first + 1
                room -= last - first + 1
                continue
            size = last - first + 1
            if not self._whole_batches and size > min(budget, room):
                size = min(budget, room)
                log_batches[0][0] = first + size
            else:
                log_batches.popleft()
            if record_limit and size > min(budget, room):
                # Kafka 4.2 record_limit: the whole log batch is cached, only what is left is acquired;
                # the rest of the batch waits in the window, available with count 0.
                size = min(budget, room)
                self._insert_new(first + size, last, AVAILABLE, 0)
                self._batches.insert(-1, [first, first + size - 1, ACQUIRED, 1, member_id, lock_id, None])
                self._firsts.insert(-1, first)
                self._cache_end = last + 1
                acquired.append((first, first + size - 1, 1))
                return
            last = first + size - 1
            self._batches.append([first, last, ACQUIRED, 1, member_id, lock_id, None])
            self._firsts.append(first)
            self._cache_end = last + 1
            acquired.append((first, last, 1))
            budget -= size
            room -= size

    def _acquire_below_start(self, first: int, last: int, member_id: str, lock_id: int, acquired: list,
                             from_start: bool) -> int:
        """SP-64: the log batch [first, last] starts below the log start offset (SPSO), which cut it; how many of
        its records below SPSO this acquisition takes. Kafka's fetch from SPSO returns the whole batch, and Kafka
        raises its base offset to SPSO only when its cache holds nothing below the batch. While it still caches
        records below (stranded ones, SP-66, or others) and none reaching the batch, it acquires the batch from
        `first`, and those below SPSO stay acquired there, stranded (SP-66). Starting at SPSO is allowed too,
        and this broker does where Kafka's choice is not the model's own (`from_start`: under record_limit, or
        when the records below use up the acquisition's budget), and for a batch of an aborted transaction."""
        spso = self._spso
        caches_below = bool(self._stranded) or self._cached_below is not None
        if not caches_below or from_start or (self._cached_below or 0) > first \
                or any(batch[LAST] >= first for batch in self._stranded) or self._transactions.aborted_in(first, last):
            return 0
        self._stranded.append([first, spso - 1, ACQUIRED, 1, member_id, lock_id, None])
        self._cached_below = max(self._cached_below or 0, spso)
        acquired.append((first, spso - 1, 1))
        return spso - first

    # -- acknowledge -------------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: list[tuple[int, int, str]], now_ms: int, renew: bool = False,
                    lock_duration_ms: int | None = None) -> str:
        """Apply one request's acknowledgements atomically; returns Kafka's error name. `renew`: the
        request carried IsRenewAck, which a batch of type renew needs (kafka-4.2); its renewals take
        `lock_duration_ms` (SP-46; None: the config's)."""
        self._tick(now_ms)
        if any(first < 0 or last < 0 or ack_type not in _ACK_TARGETS for first, last, ack_type in batches):
            return Error.INVALID_REQUEST   # not expressible in a trace (a trace names offsets >= 0, known types)
        error, handled, held_until = self._validate(member_id, batches, renew)
        # A renewal is no transition: it takes effect at once, so the renewals of the batches before a
        # failing one, of the records a failing renewal met before one not held (SP-41), or of a request whose
        # write fails, stand (Kafka 4.2).
        renewals = [batch for batch in (batches if error == Error.NONE else batches[:handled]) if batch[2] == "renew"]
        if held_until is not None and batches[handled][2] == "renew":
            renewals.append((batches[handled][0], held_until, "renew"))
        self._renew(renewals, now_ms, lock_duration_ms)
        if error == Error.NONE:   # SP-19: the transitions of every batch, or of none
            error = self._apply_acknowledgements(member_id, [batch for batch in batches if batch[2] != "renew"], now_ms)
        args: dict = {"batches": [{"first": first, "last": last, "type": ack_type} for first, last, ack_type in batches]}
        if renew:
            args["renew"] = True
            self._trace_lock_duration(args, lock_duration_ms)
        self._record(now_ms, member_id, "acknowledge", args, {"error": error})
        return error

    def _validate(self, member_id: str, batches: list[tuple[int, int, str]],
                  renew: bool) -> tuple[str, int, int | None]:
        """The request's error, how many batches passed before the one that failed, and, when it failed at a
        record not held, the last offset before that record (None: it failed before its records)."""
        # Request validation (KafkaApis) first, over every batch; then the records, batch by batch.
        previous_last = -1
        for first, last, ack_type in batches:
            if ack_type not in self._ack_types or first > last or first < previous_last \
                    or (first == previous_last and not self._whole_batches) or (ack_type == "renew" and not renew):
                return Error.INVALID_REQUEST, 0, None
            previous_last = last
        previous_last, previous_type = -1, None
        for index, (first, last, ack_type) in enumerate(batches):
            error, held_until = self._batch_error(member_id, first, last, previous_last, previous_type)
            if error != Error.NONE:
                return error, index, held_until
            previous_last, previous_type = last, ack_type
        return Error.NONE, len(batches), None

    def _batch_error(self, member_id: str, first: int, last: int, previous_last: int,
                     previous_type: str | None) -> tuple[str, int | None]:
        """The batch's error and, when it is a record not held, the last offset before that record."""
        if self._whole_batches:                       # Kafka 4.2
            if last < self._spso:                     # wholly below SPSO: ignored
                return Error.NONE, None
            if last >= self._cache_end:               # SP-14; an empty cache finds no batch at all (SP-66: the
                empty = self._spso == self._cache_end and self._cached_below is None   # records below count)
                return (Error.INVALID_RECORD_STATE if empty else Error.INVALID_REQUEST), None
            # SP-11: the shared offset is in a pending transition, unless the batch before renewed it (SP-41: a
            # renewal starts no transition)
            if first == previous_last and first >= self._spso and previous_type != "renew":
                return Error.INVALID_RECORD_STATE, None
            first = max(first, self._spso)
        else:
            if last >= self._cache_end:               # SP-13
                return Error.INVALID_REQUEST, None
            if first < self._spso:                    # below SPSO every record is terminal
                return Error.INVALID_RECORD_STATE, None
        batch = self._first_not_held(member_id, first, last)
        if batch is None:
            return Error.NONE, None
        held_until = batch[FIRST] - 1 if batch[FIRST] > first else None
        if batch[STATE] == AVAILABLE and batch[EXPIRED] == member_id and not self._whole_batches:
            return Error.REQUEST_TIMED_OUT, held_until   # SP-16 (kip): the seed's TimeoutException
        return Error.INVALID_RECORD_STATE, held_until    # SP-15; an expired lock under kafka-4.2: SP-17

    def _first_not_held(self, member_id: str, first: int, last: int) -> list | None:
        index = self._index_of(first)
        while index < len(self._batches):
            batch = self._batches[index]
            if batch[FIRST] > last:
                return None
            if batch[STATE] != ACQUIRED or batch[MEMBER] != member_id:
                return batch
            index += 1
        return None

    def _apply_acknowledgements(self, member_id: str, batches: list[tuple[int, int, str]], now_ms: int) -> str:
        live = [(max(first, self._spso), last, ack_type) for first, last, ack_type in batches if last >= self._spso]
        if not live:
            return Error.NONE
        planned = [(first, last, target, count)
                   for first, last, ack_type in live
                   for first, last, target, count in self._planned(first, last, _ACK_TARGETS[ack_type])]
        error = self._persist(planned, now_ms)
        if error != Error.NONE:
            return error   # SP-27: written before it is applied, so a failed write changes nothing
        for first, last, ack_type in live:
            self._transition(first, last, _ACK_TARGETS[ack_type])
        self._advance_start()
        return Error.NONE

    def _planned(self, first: int, last: int, target: int) -> list[tuple[int, int, int, int]]:
        """(first, last, new state, count) of the ACQUIRED runs in [first, last] after a transition to target."""
        runs = []
        index = self._index_of(first)
        while index < len(self._batches) and self._batches[index][FIRST] <= last:
            batch = self._batches[index]
            runs.append((max(first, batch[FIRST]), min(last, batch[LAST]),
                         self._landing(target, batch[COUNT]), batch[COUNT]))
            index += 1
        return runs

    def _renew(self, batches: list[tuple[int, int, str]], now_ms: int, lock_duration_ms: int | None) -> None:
        """Restart the lock of the records in `batches` (all acquired by the requester): one new lock."""
        renewed: list[tuple[int, int, int]] = []
        lock_id = self._next_lock_id
        for first, last, _ in batches:
            first = max(first, self._spso)
            if first > last:
                continue
            for batch in self._split_to(first, last):
                self._unlock(batch)
                batch[LOCK] = lock_id
                renewed.append((batch[FIRST], batch[LAST], batch[COUNT]))
        if renewed:
            self._lock(lock_id, renewed, now_ms, lock_duration_ms)

    def _landing(self, target: int, count: int) -> int:
        """SP-21: a record leaving acquired at the delivery count limit is archived, not made available."""
        if target == AVAILABLE and count >= self.config.delivery_count_limit:
            return ARCHIVED
        return target

    # -- releasing ---------------------------------------------------------------------------

    def release_member(self, member_id: str, now_ms: int) -> int:
        """SP-22: release every record member_id holds (its session closed or it left); returns how many."""
        self._tick(now_ms)
        ranges = [(batch[FIRST], batch[LAST]) for batch in self._batches
                  if batch[STATE] == ACQUIRED and batch[MEMBER] == member_id]
        stranded = self._archive_stranded(lambda batch: batch[MEMBER] == member_id)
        released = self._release_ranges(ranges, now_ms, stranded=stranded)
        self._record(now_ms, member_id, "leave", {})
        return released

    def expire_locks(self, now_ms: int) -> int:
        """SP-20: release the records of every lock whose deadline is <= now_ms; returns how many records."""
        if now_ms < self._clock_ms:
            raise ValueError(f"the clock went back: {now_ms} after {self._clock_ms}")
        self._clock_ms = now_ms
        locks = self._locks
        if not locks or locks[0][0] > now_ms:
            return 0
        ranges, expired = [], set()
        while locks and locks[0][0] <= now_ms:
            _, lock_id = heappop(locks)
            if self._lock_records.pop(lock_id, None) is not None:
                ranges.extend(self._locked_ranges(lock_id))
                expired.add(lock_id)
        ranges.sort()
        stranded = self._archive_stranded(lambda batch: batch[LOCK] in expired) if self._stranded else []
        return self._release_ranges(ranges, now_ms, expired=True, stranded=stranded)

    def _locked_ranges(self, lock_id: int) -> list[tuple[int, int]]:
        first, last = self._lock_ranges.pop(lock_id)
        index = self._index_of(first)
        ranges = []
        while index < len(self._batches) and self._batches[index][FIRST] <= last:
            batch = self._batches[index]
            if batch[STATE] == ACQUIRED and batch[LOCK] == lock_id:
                ranges.append((batch[FIRST], batch[LAST]))
            index += 1
        return ranges

    def _release_ranges(self, ranges: list[tuple[int, int]], now_ms: int, expired: bool = False,
                        stranded: list[tuple[int, int, int, int]] = ()) -> int:
        """Release the window's `ranges` (SP-20, SP-22) and write them with the `stranded` records archived."""
        if not ranges and not stranded:
            return 0
        planned = [*stranded, *(run for first, last in ranges for run in self._planned(first, last, AVAILABLE))]
        spso = self._spso  # SP-47: as Kafka, the write carries SPSO as it was before the release moved it
        for first, last in ranges:
            self._transition(first, last, AVAILABLE, expired)
        self._advance_start()
        self._persist(planned, now_ms, spso)   # as Kafka: a release stands even if its write fails
        return sum(last - first + 1 for first, last, _, _ in planned)

    def _archive_stranded(self, leaving) -> list[tuple[int, int, int, int]]:
        """SP-66: the stranded batches `leaving` picks (their lock expired, their member's session ended) are
        archived, below SPSO, and leave Kafka's cache; the runs (first, last, state, count) their write holds."""
        archived = [batch for batch in self._stranded if leaving(batch)]
        for batch in archived:
            self._unlock(batch)
        self._stranded = [batch for batch in self._stranded if not leaving(batch)]
        return [(batch[FIRST], batch[LAST], ARCHIVED, batch[COUNT]) for batch in archived]

    # -- the state machine core --------------------------------------------------------------

    def _transition(self, first: int, last: int, target: int, expired: bool = False) -> None:
        """Move the ACQUIRED records in [first, last] to target (release lands on ARCHIVED at the limit)."""
        for batch in self._split_to(first, last):
            if expired:
                batch[EXPIRED] = batch[MEMBER]
            self._leave_acquired(batch, self._landing(target, batch[COUNT]))

    def _split_to(self, first: int, last: int) -> list[list]:
        """The cached batches holding exactly [first, last], split where they reach past it."""
        index = self._index_of(first)
        if self._batches[index][FIRST] < first:
            self._split_after(index, first - 1)
            index += 1
        covered = []
        while index < len(self._batches) and self._batches[index][FIRST] <= last:
            if self._batches[index][LAST] > last:
                self._split_after(index, last)
            covered.append(self._batches[index])
            index += 1
        return covered

    def _leave_acquired(self, batch: list, state: int) -> None:
        self._unlock(batch)
        batch[STATE], batch[MEMBER], batch[LOCK] = state, None, NO_LOCK
        if state == AVAILABLE:
            self._available_records += batch[LAST] - batch[FIRST] + 1

    def _unlock(self, batch: list) -> None:
        """The batch's lock no longer holds its records."""
        size = batch[LAST] - batch[FIRST] + 1
        lock_id = batch[LOCK]
        held = self._lock_records.get(lock_id)
        if held is not None:
            if held > size:
                self._lock_records[lock_id] = held - size
            else:
                del self._lock_records[lock_id]
                self._lock_ranges.pop(lock_id, None)

    def _index_of(self, offset: int) -> int:
        """Index of the cached batch holding `offset`, or of the first batch after it."""
        return max(bisect_right(self._firsts, offset) - 1, 0)

    def _split_after(self, index: int, offset: int) -> None:
        """Split batch `index` into [first, offset] and [offset + 1, last]."""
        batch = self._batches[index]
        tail = [offset + 1, batch[LAST], batch[STATE], batch[COUNT], batch[MEMBER], batch[LOCK], batch[EXPIRED]]
        batch[LAST] = offset
        self._batches.insert(index + 1, tail)
        self._firsts.insert(index + 1, offset + 1)

    def _advance_start(self) -> None:
        """SP-23: SPSO moves past the longest prefix of terminal (acknowledged or archived) records. Under
        kafka-4.2 only once a state write completed (SP-66, Kafka's maybeUpdateCachedStateAndOffsets), which
        walks Kafka's cache from its first record, below SPSO too."""
        if self._stranded:
            return   # SP-66: a record still acquired below SPSO holds SPSO where it is
        batches = self._batches
        if not batches and self._cached_below is not None:
            # SP-66: Kafka caches records below SPSO and none from it on: its start offset goes back to the offset
            # after the highest of those (a Kafka bug; the next fetch learns the log start again).
            self._spso = self._cache_end = self._cached_below
            self._cached_below = None
            return
        done = 0
        while done < len(batches) and batches[done][STATE] in (ACKNOWLEDGED, ARCHIVED):
            done += 1
        if done:
            del batches[:done]
            del self._firsts[:done]
            self._spso = batches[0][FIRST] if batches else self._cache_end   # SP-24: never past SPEO
            self._cached_below = None   # SP-66: passing them, Kafka's cache lets the records below SPSO go

    def _persist(self, planned: list[tuple[int, int, int, int]], now_ms: int, spso: int | None = None) -> str:
        """Write the planned transitions with `spso` (default: SPSO now, before they are applied)."""
        if self.store is None or not planned:
            return Error.NONE
        start_offset = self._spso if spso is None else spso
        return persister_answer(self.store.write(self.key, self.state_epoch, start_offset, planned, now_ms))

    def _tick(self, now_ms: int) -> None:
        # The trace's timers fire before each step's op; the model replays them itself.
        self.expire_locks(now_ms)

    # -- tracing -------------------------------------------------------------------------------

    def _record(self, at_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None:
        if self._trace is not None:
            self._trace.step(at_ms, actor, op, args, observed)
            if self.trace_state and op != "check":
                self.trace_check(at_ms)  # the state after the step, so the oracle sees a wrong one at once

    def trace_check(self, now_ms: int) -> None:
        """Write a `check` step (spso, speo, states, SP-25) to the trace, if this partition is traced."""
        self._tick(now_ms)
        self._record(now_ms, "check", "check", {}, {
            "spso": self._spso, "speo": self._cache_end,
            "states": [list(run) for run in self.states()],
        })


# Persister errors as the share-partition leader answers them (Kafka 4.2, SharePartition).
_PERSISTER_ERRORS = {
    Error.FENCED_STATE_EPOCH: Error.NOT_LEADER_OR_FOLLOWER, Error.FENCED_LEADER_EPOCH: Error.NOT_LEADER_OR_FOLLOWER,
    Error.NOT_COORDINATOR: Error.COORDINATOR_NOT_AVAILABLE,
    Error.COORDINATOR_LOAD_IN_PROGRESS: Error.COORDINATOR_NOT_AVAILABLE,
}
_KEPT_ERRORS = {Error.NONE, Error.COORDINATOR_NOT_AVAILABLE, Error.GROUP_ID_NOT_FOUND, Error.UNKNOWN_TOPIC_OR_PARTITION}


def persister_answer(error: str) -> str:
    """A share coordinator's error as the share-partition leader answers it (Kafka 4.2's fetchPersisterError)."""
    return _PERSISTER_ERRORS.get(error, error if error in _KEPT_ERRORS else Error.UNKNOWN_SERVER_ERROR)


def _coalesce(acquired: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Merge contiguous runs of equal delivery count (the trace's `records` shape)."""
    runs: list[tuple[int, int, int]] = []
    for first, last, count in acquired:
        if runs and runs[-1][1] + 1 == first and runs[-1][2] == count:
            runs[-1] = (runs[-1][0], last, count)
        else:
            runs.append((first, last, count))
    return runs
