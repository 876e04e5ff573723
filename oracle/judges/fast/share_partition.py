"""Fast acceptor for share-partition traces: an optimised equivalent of model/share_partition.py.

Same public API, same Violation clauses and Ruled answers as the model
(kipcheck.model.share_partition, the plain truth checked against
spec/share-partition.md); only the data structures differ, tuned so that
`kipcheck check` keeps up with traces of millions of steps. It is trusted
only because tests/test_fastcheck_share_partition.py diffs it against the
model on generated traces (both profiles, valid and corrupted) and on every
example; `kipcheck check --reference` judges with the model instead.
Clause ids refer to spec/share-partition.md.

Library API (time comes in as `at_ms`, which never decreases):

    partition = SharePartition(start_offset=0, delivery_count_limit=5,
                               record_lock_duration_ms=30000,
                               max_inflight_records=2000, profile="kip",
                               initial_state=())  # runs loaded after a restart (SP-26)
    partition.advance(at_ms)          # fire the locks whose deadline <= at_ms (SP-20)
    partition.append(count)           # one log batch of `count` records (SP-2)
    partition.acquirable_ranges()     # [(first, last)]: records that may be acquired now (SP-3, SP-7)
    partition.acquirable_new_records()  # (first, last) of those past SPEO (empty when last < first)
    partition.lowest_acquisition(max_records, record_limit=False)
                                      # one allowed answer: the lowest acquirable records,
                                      # as observed runs [[first, last, delivery_count], ...]
    partition.check_acquisition(max_records, records, record_limit=False, archived=None)
                                      # raise Violation unless `records` is an allowed answer
    partition.acquire(at_ms, actor, max_records, records, record_limit=False, archived=None)
                                      # check, then apply the observed answer (SP-3..SP-8, SP-42, SP-63)
    partition.acknowledge(at_ms, actor, [(first, last, type), ...], renew=False, received_ms=None)
                                      # -> Ruled(error, clause), applied only when the error is
                                      # "NONE" (SP-9..SP-19, SP-41, SP-44)
    partition.storage_failure(at_ms, actor, batches, renew=False)
                                      # the acknowledgement failed on storage: no change (SP-27)
    partition.leave(at_ms, actor)     # release the actor's records (SP-22)

`acquire`, `acknowledge` and `leave` fire the expired locks themselves;
`append` takes no time, so call `advance(at_ms)` before it. `acquire` keeps
`records` until their lock fires: do not change the list afterwards. A
Violation from `acquire` leaves the model as it was.

Read-only state, for invariants checked from outside: `spso`, `speo`
(exclusive), `log_end_offset`, `state_of(offset)`, `delivery_count_of(offset)`,
`owner_of(offset)`, `lock_deadline_of(offset)` (None unless acquired),
`snapshot()` (runs `[first, last, state, delivery_count]` covering
[spso, speo)), `deciding_clause(offset)` (the rule that put a record in its
state) and `compare_snapshot(states)` (SP-25).

Records past SPEO and below the log end have never been acquired: available,
delivery count 0 (SP-1). Per-record facts of the window live in parallel
lists indexed by `offset - _base`; the prefix below SPSO is dropped now and
then so memory follows the window, not the trace.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush
from itertools import count as sequence, islice
from typing import Iterable, Iterator, Sequence

from kipcheck.model.errors import Error
from kipcheck.model.profiles import is_kafka
from kipcheck.model.share_partition import (
    ACK_TARGET, ACQUIRED, ARCHIVED, ARCHIVING, AVAILABLE, KAFKA_LOCK_EXPIRED, LOCK_EXPIRED, NOT_ACQUIRED, RULES, TERMINAL,
    RecentOffsets, StoredStart, acknowledged_in_progress, acknowledgement_answer, acquisition_violation,
    archived_runs, below_start_clause, cached_runs, check_compaction, check_config, check_group_config,
    check_log_start, dead_letter_write, dead_lettered_offsets, failing_record, loaded_runs, new_records_bounds,
    non_default_group_configs, nothing_cached, renewals_standing, runs_of, snapshot_violation,
    start_below_log_start, throttle_threshold, throttled_left_below,
)
from kipcheck.model.share_partition_log import LogFacts
from kipcheck.model.violation import Ruled, Violation

# Dropping the dead prefix of the per-record lists costs a copy of the window;
# doing it only past this many dead records keeps that cost amortized.
_TRIM_RECORDS = 4096
_NEVER = float("inf")


class SharePartition:
    """The share-partition leader's in-flight records of one partition, as a pure state machine."""

    def __init__(self, start_offset: int = 0, delivery_count_limit: int = 5,
                 record_lock_duration_ms: int = 30000, max_inflight_records: int = 2000,
                 profile: str = "kip", initial_state: Sequence = (), straddle_npe: str = "accept",
                 isolation_level: str = "read_uncommitted", renew_acknowledge_enable: bool = True,
                 dead_letter_queue: bool = False) -> None:
        check_config(start_offset, delivery_count_limit, record_lock_duration_ms, max_inflight_records, profile,
                     straddle_npe, non_default_group_configs(renew_acknowledge_enable, dead_letter_queue))
        self.profile = profile
        self.straddle_npe = straddle_npe
        self.kafka = is_kafka(profile)
        self._rules = RULES[profile]  # read only where a rule of Kafka 4.4 is a member of its rules (SP-73)
        # SP-61..SP-65: transactions and compaction. A trace that uses them is judged in the model's own words.
        self.log = LogFacts(isolation_level, profile)
        self._archived_by: dict[int, str] = {}  # SP-63, SP-65, SP-74: offset -> the clause that archived it
        # SP-70: the group configs Kafka 4.4 reads at each transition; alter_config changes them.
        self.delivery_count_limit = delivery_count_limit
        self._throttle_threshold = throttle_threshold(delivery_count_limit)  # SP-43
        self.max_inflight_records = max_inflight_records
        self.renew_acknowledge_enable = renew_acknowledge_enable  # SP-72
        self.dead_letter_queue = dead_letter_queue  # SP-73
        self.record_lock_duration_ms = record_lock_duration_ms
        self.lock_duration_ms: int | None = None  # SP-46: the duration in force, when a step gives one
        # SP-1: the window starts empty at start_offset.
        self._spso = self._speo = self._log_end = self._base = start_offset
        self.stored_start = StoredStart(start_offset)  # SP-47
        self._stored_by_request = RULES[profile].stored_by_request
        self._acknowledges_beside_fetch = RULES[profile].acknowledges_beside_fetch  # SP-67
        self.speo_clause = "SP-24"  # the clause that put SPEO where it is (SP-42 after a record_limit acquisition)
        self.in_transition: frozenset[int] = frozenset()  # SP-67, as the model keeps it
        self._state: list[str] = []
        self._count: list[int] = []
        self._owner: list[str | None] = []        # set only while acquired
        self._deadline: list[int] = []            # meaningful only while acquired
        # True while a record is available or acquired. It repeats what _state says, kept
        # so that SPSO (SP-23) finds the first non-terminal record with list.index, at C speed.
        self._open: list[bool] = []
        # SP-16: offset -> the member whose lock on it expired, until the record is acquired again.
        self._expired_owner: dict[int, str] = {}
        # SP-27: acquired offsets an acknowledgement failed on storage for; read only to name a clause.
        self._write_failed: set[int] = set()
        # SP-41: acquired offsets whose lock was renewed since; read only to name a clause.
        self._renewed: set[int] = set()
        # SP-46: acquired offsets whose lock took a step's duration; read only to name a clause.
        self._step_locked: set[int] = set()
        self.limit_archives = RecentOffsets()  # SP-21: read only to name a clause
        self.dead_letters = RecentOffsets()  # SP-74: phase 2 finished for them
        # Lock deadlines as a heap: at_ms never decreases, but a lock's duration may change between
        # acquisitions (SP-46), so a later lock may expire earlier. The sequence number breaks ties.
        self._locks: list[tuple[int, int, Sequence[Sequence[int]], str]] = []  # (deadline, sequence, runs, owner)
        self._lock_sequence = sequence()
        self._next_deadline_ms: float = _NEVER  # the front lock's deadline: most steps fire nothing
        self._batch_ends: deque[int] = deque()    # kafka-4.2: last offsets of appended batches at or past SPEO
        # No record in [SPSO, _no_available_below) is available: lets lowest_acquisition
        # skip a window full of acquired records (Kafka's nextFetchOffset does the same).
        self._no_available_below = start_offset
        # SP-26: offsets still as initial_state gave them (not acquired since); read only to name a clause.
        self._loaded: set[int] = set()
        # SP-14, SP-65: offsets of the window not in Kafka's cache: loaded ones no run covers, not acquired
        # since, and ones compaction removed that an acquisition skipped.
        self._holes: set[int] = set()
        # SP-66 (kafka-4.2): what Kafka still caches below SPSO once the log start moved past it: the records
        # left acquired there, offset -> (owner, lock deadline), and the offset after the highest record
        # cached below SPSO (None: none).
        self._stranded: dict[int, tuple[str, int]] = {}
        self._cached_below: int | None = None
        if initial_state:
            self._load(loaded_runs(initial_state, start_offset, self._rules.loadable_states))

    def _load(self, runs: list[tuple[int, int, str, int]]) -> None:
        """SP-26: the window holds the loaded runs; offsets between them are available with count 0."""
        for first, last, state, count in runs:
            covered = self._base + len(self._state)
            if first > covered:
                self._append_records(first - covered, AVAILABLE, 0, None)
                self._holes.update(range(covered, first))
            self._append_records(last + 1 - first, state, count, None)
            if state in TERMINAL:
                self._open[first - self._base:] = [False] * (last + 1 - first)
        self._speo = self._log_end = self._base + len(self._state)  # SP-26: the log end starts at SPEO
        self._loaded = set(range(self._spso, self._speo))
        self._settle()  # SP-23 holds before the first step too (Kafka moves SPSO once it has loaded the state)

    # Read-only accessors.

    @property
    def spso(self) -> int:
        return self._spso

    @property
    def speo(self) -> int:
        return self._speo

    @property
    def log_end_offset(self) -> int:
        return self._log_end

    def _index(self, offset: int) -> int:
        if not self._spso <= offset < self._speo:
            raise KeyError(f"offset {offset} is outside the window [{self._spso}, {self._speo})")
        return offset - self._base

    def state_of(self, offset: int) -> str:
        return self._state[self._index(offset)]

    def has_available_record(self) -> bool:
        """Whether a record of the window is available (Kafka 4.2 fetches from the first one, SP-65)."""
        start = max(self._spso, self._no_available_below) - self._base
        return AVAILABLE in self._state[start:self._speo - self._base]

    def delivery_count_of(self, offset: int) -> int:
        return self._count[self._index(offset)]

    def owner_of(self, offset: int) -> str | None:
        return self._owner[self._index(offset)]

    def lock_deadline_of(self, offset: int) -> int | None:
        index = self._index(offset)
        return self._deadline[index] if self._state[index] is ACQUIRED else None

    def snapshot(self) -> list[list]:
        """SP-25: the window as runs [first, last, state, delivery_count], ascending."""
        runs: list[list] = []
        for offset in range(self._spso, self._speo):
            index = offset - self._base
            state, count = self._state[index], self._count[index]
            if runs and runs[-1][2] is state and runs[-1][3] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, state, count])
        return runs

    def deciding_clause(self, offset: int) -> str:
        """SP-25: the clause of the rule that put the record in its present state and count; below SPSO,
        SP-21 for a record recently archived at the delivery limit, else SP-23 (SPSO passed it: terminal)."""
        if offset < self._spso:
            return below_start_clause(self, offset)
        index = self._index(offset)
        state, count = self._state[index], self._count[index]
        if state is ACQUIRED:
            return ("SP-27" if offset in self._write_failed else "SP-46" if offset in self._step_locked
                    else "SP-41" if offset in self._renewed else "SP-4")
        if offset in self._archived_by:
            return self._archived_by[offset]
        if offset in self._loaded:  # SP-26: still as initial_state gave it
            return "SP-26"
        if state is ARCHIVING:
            return "SP-73"
        if state is AVAILABLE:
            if count >= self.delivery_count_limit:
                return "SP-70"  # left available when the group lowered its limit
            if offset in self._expired_owner:
                return "SP-20"
            return "SP-1" if count == 0 else "SP-9"
        if state is ARCHIVED and count >= self.delivery_count_limit:
            return "SP-21"
        return "SP-9"

    def compare_snapshot(self, states: Sequence[Sequence]) -> None:
        """SP-25: raise Violation unless `states` (runs [first, last, state, count]) equals the window."""
        expected_first = self._spso
        for first, last, state, count in states:
            if first != expected_first or last < first or last >= self._speo:
                break
            start, stop = first - self._base, last - self._base + 1
            length = stop - start
            if self._state[start:stop].count(state) != length or self._count[start:stop].count(count) != length:
                break
            expected_first = last + 1
        else:
            if expected_first == self._speo:
                return
        raise _explained(snapshot_violation(self, states))

    # Time.

    def advance(self, at_ms: int) -> None:
        """SP-20: fire every lock whose deadline is <= at_ms, before the step's own op."""
        if at_ms >= self._next_deadline_ms:
            self._fire_locks(at_ms)

    def _fire_locks(self, at_ms: int) -> None:
        locks, spso, expired = self._locks, self._spso, False
        while locks and locks[0][0] <= at_ms:
            deadline, _, runs, owner = heappop(locks)
            for first, last, _ in runs:
                if first < self._spso and self._stranded:  # SP-66: below SPSO a lock's expiry archives the record
                    for offset in range(first, min(last + 1, self._spso)):
                        if self._stranded.get(offset) == (owner, deadline):
                            del self._stranded[offset]
                            expired = True
                for offset in range(max(first, self._spso), last + 1):
                    index = offset - self._base
                    # A record acquired again since carries a later lock entry of its own.
                    if self._state[index] is ACQUIRED and self._deadline[index] == deadline and self._owner[index] == owner:
                        self._release_record(index)
                        expired = True
                        if self._state[index] is AVAILABLE:
                            self._expired_owner[offset] = owner
        self._next_deadline_ms = locks[0][0] if locks else _NEVER
        if expired:  # SP-47: each expired lock's write carries SPSO as it stood then, and nobody waits for it
            self._settle()
            self.stored_start.writing(spso, self._spso)

    # Log.

    def append(self, count: int, producer: str | None = None) -> None:
        """SP-2: one log batch of `count` records at the log end (SP-61: in `producer`'s open transaction)."""
        if count < 1:
            raise ValueError(f"an append holds at least one record, not {count}")
        self.log.append(self._log_end, count, producer)
        self._log_end += count
        if self.kafka:  # SP-6: only Kafka 4.2 acquires by log batch
            self._batch_ends.append(self._log_end - 1)

    # The log under Kafka 4.2: transactions, the log start offset, compaction (SP-60..SP-65).

    def end_transaction(self, producer: str, result: str) -> None:
        """SP-61: the producer's transaction ends with a control batch of one record at the log end."""
        self.log.end_transaction(producer, result)
        self.append(1)

    def move_log_start(self, at_ms: int, offset: int) -> None:
        """SP-64: the log start offset moved to `offset`; SPSO jumps to it, the records below leave the window
        (SP-66: the acquired ones stay acquired below SPSO, in Kafka's cache with the rest)."""
        check_log_start(self, offset)
        self.log.used = True
        self.advance(at_ms)
        self.log.start_offset = max(self.log.start_offset, offset)
        if offset <= self._spso:  # Kafka ignores a log start offset at or below SPSO
            return
        for below in range(self._spso, min(offset, self._speo)):
            index = below - self._base
            if below not in self._holes:
                self._cached_below = max(self._cached_below or 0, below + 1)
            if self._state[index] is ACQUIRED:
                self._stranded[below] = (self._owner[index], self._deadline[index])
            self._holes.discard(below)
        covered = self._base + len(self._state)
        if offset > covered:  # offsets never acquired below the new start: below SPSO, never read
            self._append_records(offset - covered, ARCHIVED, 0, None)
            self._open[covered - self._base:] = [False] * (offset - covered)
        if offset > self._speo:  # SPEO no longer where an acquisition (SP-42 or not) put it
            self.speo_clause = "SP-24"
        self._spso, self._speo = offset, max(self._speo, offset)
        self._no_available_below = max(self._no_available_below, offset)
        while self._batch_ends and self._batch_ends[0] < self._speo:
            self._batch_ends.popleft()

    def compact(self, at_ms: int, first: int, last: int) -> None:
        """SP-65: compaction removed the whole log batches [first, last]; available records of them are archived."""
        check_compaction(self, first, last)
        self.advance(at_ms)
        self.log.remove(first, last)
        for offset in range(max(first, self._spso), min(last + 1, self._speo)):
            index = offset - self._base
            if self._state[index] is AVAILABLE:  # SP-66: SPSO passes them at the next write
                self._state[index], self._open[index] = ARCHIVED, False
                self._archived_by[offset] = "SP-65"

    # A group's configs and its dead-letter queue under Kafka 4.4 (SP-70..SP-74).

    def alter_config(self, settings) -> None:
        """SP-70: the group's configs changed to `settings`; read at each transition from now on."""
        check_group_config(self, settings)
        for key, value in settings.items():
            setattr(self, key, value)
        self._throttle_threshold = throttle_threshold(self.delivery_count_limit)  # SP-43 with the limit in force

    def archiving_runs(self) -> list[tuple[int, int]]:
        """SP-73: the window's archiving records, as runs (first, last)."""
        offsets = list(self._offsets_in(ARCHIVING, self._spso, self._speo))
        return [(first, last) for first, last, _ in runs_of(offsets, lambda _: 0)]

    def dead_lettered(self, first: int, last: int, seen_later: bool = False) -> None:
        """SP-74: phase 2 of the dead-letter queue finished for [first, last]: its archiving records are archived.
        `seen_later`: a later step showed it, so it finished at some time since they became archiving."""
        spso = self._spso
        for offset in dead_lettered_offsets(self, first, last):
            index = offset - self._base
            self._state[index], self._open[index], self._archived_by[offset] = ARCHIVED, False, "SP-74"
            self._loaded.discard(offset)
            self.dead_letters.add(offset)
        self._settle()  # phase 2 is a state write: SPSO moves when it completes (SP-66 under Kafka's profiles)
        self.stored_start.writing(*dead_letter_write(self, spso, seen_later))  # SP-47: phase 2's write

    # Acquisition.

    def acquirable_ranges(self) -> list[tuple[int, int]]:
        """SP-3: the records that may be acquired now, as inclusive ranges (SP-7 caps new records under kip)."""
        ranges: list[tuple[int, int]] = []
        offset = self._spso
        while offset < self._speo:
            if self._state[offset - self._base] is AVAILABLE:
                first = offset
                while offset + 1 < self._speo and self._state[offset + 1 - self._base] is AVAILABLE:
                    offset += 1
                ranges.append((first, offset))
            offset += 1
        first, last = self.acquirable_new_records()
        if last >= first:
            if ranges and ranges[-1][1] == first - 1:
                ranges[-1] = (ranges[-1][0], last)
            else:
                ranges.append((first, last))
        return ranges

    def acquirable_new_records(self) -> tuple[int, int]:
        """(first, last) of the never-acquired records that may be acquired now; empty when last < first."""
        return new_records_bounds(self)

    def lowest_acquisition(self, max_records: int, record_limit: bool = False) -> list[list[int]]:
        """One allowed answer: the lowest acquirable records (Kafka 4.2: rounded up to whole new batches,
        or under `record_limit` exactly as many new records as there is room for, SP-42)."""
        offsets = list(islice(self._offsets_in(AVAILABLE, max(self._spso, self._no_available_below), self._speo),
                              max_records))
        self._no_available_below = offsets[0] if offsets else self._speo
        new_first, new_last = self.acquirable_new_records()
        offsets.extend(range(new_first, min(new_last + 1, new_first + max_records - len(offsets))))
        if self.kafka:
            offsets = self._round_up_new_records(offsets, max_records, record_limit)
        new = [offset for offset in offsets if offset >= self._speo]
        if new and self.log.read_committed:  # SP-63: records of aborted transactions are left out
            aborted = {offset for first, last in self.log.aborted_in(new[0], new[-1]) for offset in range(first, last + 1)}
            offsets = [offset for offset in offsets if offset not in aborted]
        return self._runs(offsets)

    def _offsets_in(self, state: str, first: int, stop: int) -> Iterator[int]:
        """The offsets of [first, stop) in `state`, ascending, found by list.index at C speed."""
        index, end = first - self._base, stop - self._base
        while True:
            try:
                index = self._state.index(state, index, end)
            except ValueError:
                return
            yield index + self._base
            index += 1

    def _round_up_new_records(self, offsets: list[int], max_records: int, record_limit: bool) -> list[int]:
        # SP-6: Kafka completes the log batch holding the last new record; SP-42: not under record_limit.
        reacquired = [offset for offset in offsets if offset < self._speo]
        # SP-43: a throttled redelivery comes alone, or ends the acquisition before it.
        threshold = throttle_threshold(self.delivery_count_limit)
        throttled = [index for index, offset in enumerate(reacquired)
                     if self._count[offset - self._base] >= threshold]
        if throttled:
            return reacquired[:throttled[0]] or reacquired[:1]
        room = min(max_records, self.max_inflight_records - (self._speo - self._spso)) - len(reacquired)
        if room <= 0 or len(offsets) == len(reacquired):
            return reacquired
        # SP-65: past batches compaction removed; SP-62: below the last stable offset.
        new_first, new_last = self.acquirable_new_records()
        last = min(new_first + room - 1, new_last)
        if not record_limit:
            _, last = self._log_batch_around(last)
        return reacquired + list(range(new_first, last + 1))

    def _runs(self, offsets: Iterable[int]) -> list[list[int]]:
        runs: list[list[int]] = []
        for offset in offsets:
            count = self._count[offset - self._base] + 1 if offset < self._speo else 1
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, count])
        return runs

    def check_acquisition(self, max_records: int, records: Sequence[Sequence[int]], record_limit: bool = False,
                          archived: Sequence[Sequence[int]] | None = None) -> None:
        """Raise Violation unless `records` (runs [first, last, delivery_count]) is an allowed acquisition,
        with `archived` (runs [first, last]; None: not observed) its records of aborted transactions (SP-63).

        Only detects: a refusal is explained by the model's own words (acquisition_violation). A trace
        with transactions, a moved log start or compaction is judged by those words alone."""
        if self.log.used:
            violation = acquisition_violation(self, max_records, records, record_limit, archived)
            if violation is not None:
                raise violation
        elif archived or not self._allowed_acquisition(max_records, records, record_limit and self.kafka):
            raise _explained(acquisition_violation(self, max_records, records, record_limit, archived))

    def _allowed_acquisition(self, max_records: int, records: Sequence[Sequence[int]], record_limit: bool) -> bool:
        speo, base = self._speo, self._base
        previous_last = self._spso - 1
        total = reacquired = highest = 0
        new_first = new_last = -1
        for first, last, count in records:
            highest = max(highest, count)
            # SP-3: ascending runs, each record once, within [SPSO, log end).
            if first > last or first <= previous_last or last >= self._log_end:
                return False
            if first < speo:
                stop = min(last, speo - 1) - base + 1
                length = stop - (first - base)
                # SP-3: available records; SP-4: the observed count is the stored count plus one.
                if (self._state[first - base:stop].count(AVAILABLE) != length
                        or self._count[first - base:stop].count(count - 1) != length):
                    return False
                reacquired += length
            if last >= speo:
                if count != 1:  # SP-4: a record never acquired is delivered for the first time
                    return False
                if new_first < 0:
                    new_first = max(first, speo)
                elif self.kafka and first != new_last + 1:  # SP-6: one contiguous run
                    return False
                new_last = last
            total += last - first + 1
            previous_last = last
        if record_limit and total > max_records:  # SP-42: a hard limit
            return False
        if self.kafka and highest > self._throttle_threshold:  # SP-43: last deliveries alone, no new beside
            limit = self.delivery_count_limit
            if (limit > 2 and highest == limit and total > 1) or new_first >= 0:
                return False
        if self.kafka and records:  # SP-43: nothing above a throttled redelivery left available
            start, stop = self._spso - base, min(previous_last, speo) - base
            if stop > start and max(self._count[start:stop]) >= self._throttle_threshold \
                    and throttled_left_below(self, records, self._throttle_threshold) is not None:
                return False
        if self.kafka:
            return new_first < 0 or self._allowed_new_batches(max_records, reacquired, new_first, new_last, record_limit)
        # SP-5, and SP-7 for the window after an acquisition of new records (a loaded one may be over, SP-26).
        return total <= max_records and not (previous_last >= speo
                                             and previous_last - self._spso >= self.max_inflight_records)

    def _allowed_new_batches(self, max_records: int, reacquired: int, new_first: int, new_last: int,
                             record_limit: bool) -> bool:
        window = self._speo - self._spso
        if window >= self.max_inflight_records:  # SP-8
            return False
        room = min(max_records, self.max_inflight_records - window) - reacquired
        previous_end, end = self._log_batch_around(new_last)
        if record_limit:  # SP-42: exactly the room left, or fewer ending at a log batch's end
            count = new_last + 1 - self._speo
            return new_first == self._speo and (count == room or (count < room and end == new_last))
        # SP-6: new records are whole log batches from SPEO, overshooting only to complete a batch.
        return new_first == self._speo and end == new_last and 0 < room and previous_end + 1 - self._speo < room

    def log_batch_of(self, offset: int) -> tuple[int, int]:
        """(first, last) offset of the log batch that holds `offset` (at or past SPSO, below the log end)."""
        return self.log.batch_of(offset, self._log_end)

    def _log_batch_around(self, offset: int) -> tuple[int, int]:
        """(last offset before the log batch holding `offset`, last offset of that batch), for offsets >= SPEO."""
        previous_end = self._speo - 1
        for end in self._batch_ends:
            if end >= offset:
                return previous_end, end
            previous_end = end
        return previous_end, self._log_end - 1

    def acquire(self, at_ms: int, actor: str, max_records: int, records: Sequence[Sequence[int]],
                record_limit: bool = False, archived: Sequence[Sequence[int]] | None = None,
                released_beside: frozenset[int] = frozenset()) -> None:
        """Check the observed acquisition, then apply it: the model continues from the observed answer.
        `record_limit`: Kafka 4.2's record_limit acquire mode (SP-42; batch_optimized otherwise).
        `archived`: the observed runs [first, last] acquired and archived at once (SP-63); None: not observed.
        `released_beside`: the records the acknowledgements of the same ShareFetch released just before (SP-67)."""
        if at_ms >= self._next_deadline_ms:  # SP-20: locks fire before the op
            self._fire_locks(at_ms)
        uncached = self.kafka and nothing_cached(self._spso, self._speo, self._stranded, self._cached_below)
        if not records and not archived:  # SP-3: an acquisition may be empty
            if uncached:
                self._start_at_first_cached()
            return
        self.in_transition = released_beside if self._acknowledges_beside_fetch else frozenset()
        try:
            self.check_acquisition(max_records, records, record_limit, archived)
        finally:
            self.in_transition = frozenset()
        speo = self._speo
        if self.log.used:
            self._archive_aborted(archived_runs(self, records, archived))
        # SP-46: Kafka reads the lock duration each time it starts a lock (a group's config may change it).
        step_lock = self.lock_duration_ms is not None
        deadline = at_ms + (self.lock_duration_ms if step_lock else self.record_lock_duration_ms)
        for first, last, count in self._strand_below(records, actor, deadline):
            self._acquire_run(first, last, count, actor, deadline)
            if step_lock:
                self._step_locked.update(range(first, last + 1))
            elif self._step_locked:
                self._step_locked.difference_update(range(first, last + 1))
        new_last = self._base + len(self._state) - 1  # the highest record in the window now
        if new_last >= speo:
            self.speo_clause = "SP-24"
            if record_limit and self.kafka:
                # SP-42: the rest of the log batch enters the window, available with count 0.
                _, batch_end = self._log_batch_around(new_last)
                if batch_end > new_last:
                    self._append_records(batch_end - new_last, AVAILABLE, 0, None)
                    self._no_available_below = min(self._no_available_below, new_last + 1)
                    self.speo_clause = "SP-42"
        # One lock entry per acquisition, holding its runs (the caller must not change them).
        heappush(self._locks, (deadline, next(self._lock_sequence), records, actor))
        self._next_deadline_ms = min(self._next_deadline_ms, deadline)
        # SP-24: SPEO is the offset after the highest acquired record (the lists end there).
        self._speo = self._base + len(self._state)
        batch_ends = self._batch_ends
        while batch_ends and batch_ends[0] < self._speo:
            batch_ends.popleft()
        if uncached:
            self._start_at_first_cached()

    def start_below(self) -> int | None:
        """SP-64: the offset below SPSO at which Kafka would start new records now, or None."""
        return start_below_log_start(self, self._stranded, self._cached_below)

    def _strand_below(self, records: Sequence[Sequence[int]], actor: str, deadline: int) -> Sequence[Sequence[int]]:
        """SP-64, SP-66: new records acquired below SPSO (start_below) stay acquired there, in Kafka's cache, as
        the ones the log start moved past do (their lock entry holds the whole run); the runs from SPSO on."""
        below = self.start_below()
        if not records or records[0][0] != below:
            return records
        first, last, count = records[0]
        for offset in range(first, self._spso):
            self._stranded[offset] = (actor, deadline)
        self._cached_below = max(self._cached_below or 0, self._spso)
        return [[self._spso, last, count], *records[1:]]

    def _start_at_first_cached(self) -> None:
        """SP-66: an acquisition into an empty cache puts SPSO at the first offset it acquired (or archived,
        SP-63), past the batches compaction removed before it (SP-65); or, when the fetch found the log start
        past SPEO (after SPSO went back, SP-66), at that log start offset."""
        if self._spso == self._speo and self.log.start_offset > self._speo:
            self._reset_window(self.log.start_offset)
        while self._spso < self._speo and self._spso in self._holes:
            self._holes.discard(self._spso)
            self._spso += 1

    def _reset_window(self, offset: int) -> None:
        """An empty window at `offset` (SP-66), which may lie below SPSO: the per-record lists start afresh."""
        for records in (self._state, self._count, self._owner, self._deadline, self._open):
            records.clear()
        self._holes.clear()
        self._base = self._spso = self._speo = self._no_available_below = offset

    def _archive_aborted(self, runs: list[tuple[int, int]]) -> None:
        # SP-63: acquired (count 1) and archived at once; the window reaches past them.
        for first, last in runs:
            self._fill_to(first)
            self._append_records(last + 1 - first, ARCHIVED, 1, None)
            self._open[first - self._base:] = [False] * (last + 1 - first)
            self._archived_by.update(dict.fromkeys(range(first, last + 1), "SP-63"))
        self._speo = self._base + len(self._state)

    def _fill_to(self, offset: int) -> None:
        """SP-4: records skipped past SPEO enter the window available, count 0; SP-65: archived where
        compaction removed them, and not in Kafka's cache."""
        covered = self._base + len(self._state)
        for skipped in range(covered, offset):
            if self.log.is_removed(skipped):
                self._append_records(1, ARCHIVED, 0, None)
                self._open[-1] = False
                self._holes.add(skipped)
                self._archived_by[skipped] = "SP-65"
            else:
                self._append_records(1, AVAILABLE, 0, None)
                self._no_available_below = min(self._no_available_below, skipped)

    def _acquire_run(self, first: int, last: int, count: int, actor: str, deadline: int) -> None:
        # SP-4: acquired, owned by the actor, count incremented, locked until at_ms + duration.
        covered = self._base + len(self._state)
        if first >= covered:  # the whole run enters the window
            if first > covered and self.log.used:
                self._fill_to(first)
            elif first > covered:  # SP-4: records skipped past SPEO enter the window available, count 0
                self._append_records(first - covered, AVAILABLE, 0, None)
                self._no_available_below = min(self._no_available_below, covered)
            self._append_records(last + 1 - first, ACQUIRED, count, actor, deadline)
            return
        start, stop = first - self._base, min(last + 1, covered) - self._base
        length = stop - start
        self._state[start:stop] = [ACQUIRED] * length
        self._count[start:stop] = [count] * length
        self._owner[start:stop] = [actor] * length
        self._deadline[start:stop] = [deadline] * length
        if self._expired_owner:
            for offset in range(first, stop + self._base):
                self._expired_owner.pop(offset, None)
        if self._write_failed:
            self._write_failed.difference_update(range(first, stop + self._base))
        if self._renewed:
            self._renewed.difference_update(range(first, stop + self._base))
        if self._loaded:
            self._loaded.difference_update(range(first, stop + self._base))
            self._holes.difference_update(range(first, stop + self._base))
        if last >= covered:  # the rest of the run enters the window
            self._append_records(last + 1 - covered, ACQUIRED, count, actor, deadline)

    def _append_records(self, length: int, state: str, count: int, owner: str | None, deadline: int = 0) -> None:
        self._state.extend([state] * length)
        self._count.extend([count] * length)
        self._owner.extend([owner] * length)
        self._deadline.extend([deadline] * length)
        self._open.extend([True] * length)

    # Acknowledgement.

    def acknowledge(self, at_ms: int, actor: str, batches: Sequence[tuple[int, int, str]], renew: bool = False,
                    received_ms: int | None = None) -> Ruled:
        """As the model's `acknowledge`: one request of batches (first, last, type), applied when its
        answer is NONE (SP-9..SP-19, SP-41, SP-44)."""
        if self.kafka and received_ms is not None:
            return acknowledged_in_progress(self, at_ms, actor, batches, renew, received_ms)
        if at_ms >= self._next_deadline_ms:  # SP-20: locks fire before the op
            self._fire_locks(at_ms)
        ruled, handled = acknowledgement_answer(batches, self.profile, actor, self._spso, self._speo,
                                                self._owner_error, self._holes, self.straddle_npe, renew,
                                                self.renew_acknowledge_enable, self._cached_below is not None)
        # SP-41: the renewals done before the request failed stand (SP-72: none where the group refuses them).
        applied = batches if ruled.value == Error.NONE else renewals_standing(
            batches, ruled, handled,
            lambda first, last: failing_record(actor, first, last, self._spso, self._holes, self._owner_error)
        ) if self.renew_acknowledge_enable else []
        if applied:
            spso = self._spso
            for first, last, ack_type in applied:
                if first < spso:  # SP-18: Kafka skips offsets below SPSO
                    first = spso
                # SP-14: Kafka skips the holes inside a batch, which are not in its cache.
                runs = cached_runs(first, last, self._holes) if self._holes else ((first, last),)
                for run_first, run_last in runs:
                    if run_first > run_last:
                        continue
                    if ack_type == "renew":
                        self._renew(run_first, run_last, actor, at_ms)
                    elif ack_type == "reject":  # SP-9 (SP-73: archiving under a dead-letter queue)
                        self._apply_acknowledgement(run_first, run_last, self._rules.archive_state(self))
                    else:
                        self._apply_acknowledgement(run_first, run_last, ACK_TARGET[ack_type])
            if any(ack_type != "renew" and last >= spso for _, last, ack_type in applied):  # SP-47
                # SP-23: SPSO can move only if the record at SPSO is now terminal.
                if spso < self._speo and not self._open[spso - self._base]:
                    self._settle()
                self.stored_start.wrote(*self._stored_by_request(spso, self._spso))
        return ruled

    def storage_failure(self, at_ms: int, actor: str, batches: Sequence[tuple[int, int, str]],
                        renew: bool = False) -> None:
        """SP-27: an acknowledgement answered with a storage error changes no record, but its renewals
        stand (SP-41, kafka-4.2); as at every step, the locks expired by `at_ms` fire first (SP-20), and
        that transition is kept."""
        self.advance(at_ms)
        renew = renew and self.kafka and self.renew_acknowledge_enable  # SP-72: no renewal when disabled
        for first, last, ack_type in batches:  # remembered only to name SP-27 if a check finds them changed
            for offset in range(max(first, self._spso), min(last + 1, self._speo)):
                if self._owner[offset - self._base] == actor:
                    self._write_failed.add(offset)
                    if renew and ack_type == "renew":  # SP-41: a renewal is not written, and stands
                        self._renew(offset, offset, actor, at_ms)

    def _renew(self, first: int, last: int, actor: str, at_ms: int) -> None:
        """SP-41: the actor's lock on [first, last] restarts; owner, state and count are kept."""
        start, stop = first - self._base, last - self._base + 1
        step_lock = self.lock_duration_ms is not None  # SP-46, as for an acquisition
        deadline = at_ms + (self.lock_duration_ms if step_lock else self.record_lock_duration_ms)
        self._deadline[start:stop] = [deadline] * (stop - start)
        self._renewed.update(range(first, last + 1))
        if step_lock:
            self._step_locked.update(range(first, last + 1))
        elif self._step_locked:
            self._step_locked.difference_update(range(first, last + 1))
        # The old entry no longer matches these records' deadline and fires nothing for them.
        heappush(self._locks, (deadline, next(self._lock_sequence), ((first, last, 0),), actor))
        self._next_deadline_ms = min(self._next_deadline_ms, deadline)

    def _owner_error(self, actor: str, first: int, last: int) -> Ruled | None:
        start, stop = first - self._base, last - self._base + 1
        # SP-15: the owner is set only while a record is acquired.
        if self._owner[start:stop].count(actor) == stop - start:
            return None
        return self._not_owned_error(actor, start, stop)

    def _not_owned_error(self, actor: str, start: int, stop: int) -> Ruled:
        index = next(i for i in range(start, stop) if self._owner[i] != actor)
        expired = self._state[index] is AVAILABLE and self._expired_owner.get(index + self._base) == actor
        if expired and not self.kafka:  # SP-16
            return LOCK_EXPIRED
        if expired:  # SP-17
            return KAFKA_LOCK_EXPIRED
        return NOT_ACQUIRED

    def _apply_acknowledgement(self, first: int, last: int, target: str) -> None:
        start, stop = first - self._base, last - self._base + 1
        length = stop - start
        # SP-21: a release reaching the limit archives, record by record.
        if target is AVAILABLE and max(self._count[start:stop]) >= self.delivery_count_limit:
            for index in range(start, stop):
                self._release_record(index)
            return
        # SP-9: accept -> acknowledged, release -> available, reject -> archived (SP-12: gap -> archived;
        # SP-73: reject -> archiving, not terminal); count kept.
        self._state[start:stop] = [target] * length
        self._owner[start:stop] = [None] * length
        if target is AVAILABLE:
            self._no_available_below = min(self._no_available_below, first)
        elif target is not ARCHIVING:
            self._open[start:stop] = [False] * length

    def _release_record(self, index: int) -> None:
        # SP-9 / SP-20 / SP-22: back to available with the count kept;
        # SP-21: archived instead once the count has reached the limit (SP-70: the limit in force now;
        # SP-73: archiving, not terminal, under a dead-letter queue).
        self._owner[index] = None
        if self._count[index] >= self.delivery_count_limit:
            self._state[index] = state = self._rules.archive_state(self)
            self._open[index] = state is ARCHIVING
            self.limit_archives.add(index + self._base)
        else:
            self._state[index] = AVAILABLE
            self._no_available_below = min(self._no_available_below, index + self._base)

    # Membership.

    def leave(self, at_ms: int, actor: str) -> None:
        """SP-22: the actor's session ended; its acquired records are released, counts kept."""
        self.advance(at_ms)
        owner, spso, held = self._owner, self._spso, False
        index, stop = self._spso - self._base, self._speo - self._base
        while True:
            try:
                index = owner.index(actor, index, stop)
            except ValueError:
                break
            self._release_record(index)
            held = True
        for offset in [offset for offset, (owner, _) in self._stranded.items() if owner == actor]:
            del self._stranded[offset]  # SP-66: below SPSO a released record is archived
            held = True
        if held:  # SP-47: the release is written, and the session's last answer does not wait for it
            self._settle()
            self.stored_start.writing(*self._stored_by_request(spso, self._spso))

    # SPSO.

    def _settle(self) -> None:
        """SPSO after a step that wrote the share state (SP-23): under the Kafka profiles as Kafka moves it (SP-66)."""
        if not self.kafka:
            self._advance_start()
        elif self._stranded:  # SP-66: a record still acquired below SPSO holds it where it is
            return
        elif all(offset in self._holes for offset in range(self._spso, self._speo)):  # nothing cached from SPSO on
            if self._cached_below is not None:  # SP-66: Kafka's start offset goes back to its last cached offset + 1
                self._reset_window(self._cached_below)
                self._cached_below = None
        elif self._advance_start():  # passing the records below SPSO, Kafka's cache lets them go
            self._cached_below = None

    def _advance_start(self) -> bool:
        """SP-23: SPSO passes the longest prefix of terminal records (SP-65: and of offsets compaction removed)
        and stops at the first non-terminal one; whether it moved."""
        base, spso = self._base, self._spso
        stop = self._speo - base
        try:
            index = self._open.index(True, self._spso - base, stop)
        except ValueError:  # every in-flight record is terminal: the window empties
            index = stop
        self._spso = index + base
        if self._holes and self._spso > spso:
            self._holes.difference_update(range(spso, self._spso))
        # SP-24: SPEO is never below SPSO (the search stops at SPEO).
        if index >= _TRIM_RECORDS:
            self._trim(index)
        return self._spso > spso

    def _trim(self, dead: int) -> None:
        for records in (self._state, self._count, self._owner, self._deadline, self._open):
            del records[:dead]
        self._base += dead
        self.log.forget_batches_below(self._base)
        if self._expired_owner:
            self._expired_owner = {offset: owner for offset, owner in self._expired_owner.items() if offset >= self._base}
        if self._loaded:
            self._loaded = {offset for offset in self._loaded if offset >= self._base}
            self._holes = {offset for offset in self._holes if offset >= self._base}
        if self._write_failed:
            self._write_failed = {offset for offset in self._write_failed if offset >= self._base}
        if self._renewed:
            self._renewed = {offset for offset in self._renewed if offset >= self._base}
        if self._archived_by:
            self._archived_by = {offset: clause for offset, clause in self._archived_by.items() if offset >= self._base}
        if self._step_locked:
            self._step_locked = {offset for offset in self._step_locked if offset >= self._base}


def _explained(violation: Violation | None) -> Violation:
    """The model's explanation of a refusal this acceptor detected; both must agree that there is one."""
    if violation is None:
        raise AssertionError("the fast acceptor refused what the model allows: a bug in oracle/judges/fast "
                             "(kipcheck check --reference judges with the model)")
    return violation
