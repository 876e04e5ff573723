"""KIP-932: the in-flight records of one share-partition (seed 002), the plain reference.

Clause ids refer to spec/share-partition.md. The profile (`kip`, the seed's
text, or `kafka-4.2`, Apache Kafka 4.2's behaviour) is a constructor argument.
oracle/judges/fast/share_partition.py is the fast equivalent the judge uses;
tests/test_fastcheck_share_partition.py diffs the two.

Library API (time comes in as `at_ms`, which never decreases):

    partition = SharePartition(start_offset=0, delivery_count_limit=5, record_lock_duration_ms=30000,
                               max_inflight_records=2000, profile="kip", initial_state=())
                                               # initial_state: runs [first, last, state, delivery_count]
                                               # of a partition reloaded after a restart (SP-26)
    partition.advance(at_ms)                   # fire the locks whose deadline <= at_ms (SP-20)
    partition.append(count)                    # one log batch of `count` records (SP-2)
    partition.acquirable_ranges()              # [(first, last)]: records that may be acquired now (SP-3, SP-7)
    partition.acquirable_new_records()         # (first, last) of those past SPEO (empty when last < first)
    partition.lowest_acquisition(max_records, record_limit=False)
                                               # one allowed answer, as runs [[first, last, delivery_count]]
    partition.check_acquisition(max_records, records, record_limit=False, archived=None)
                                               # raise Violation unless allowed
    partition.acquire(at_ms, actor, max_records, records, record_limit=False, archived=None)
                                               # check, then apply the observed answer (SP-3..SP-8);
                                               # record_limit: Kafka 4.2's record_limit acquire mode (SP-42);
                                               # archived: runs archived at once (SP-63)
    partition.acknowledge(at_ms, actor, [(first, last, type), ...], renew=False, received_ms=None)
                                               # -> Ruled(error, clause), applied only when the error is
                                               # "NONE" (SP-9..SP-19); renew: the request announced
                                               # renewals (IsRenewAck, SP-41); received_ms: received
                                               # earlier than answered (SP-44)
    partition.storage_failure(at_ms, actor, batches, renew=False)
                                               # the acknowledgement failed on storage: no change (SP-27)
    partition.leave(at_ms, actor)              # release the actor's records (SP-22)
    partition.stored_start.allows(spso)        # the share coordinator may hold this SPSO now (SP-47)
    delivered_violation(partition, records, delivered)
                                               # Violation or None: the record bytes of an acquisition's
                                               # answer, runs [first, last] as sent, hold exactly its
                                               # records (SP-48; read after the acquisition)
    partition.lock_duration_ms = ms            # the lock duration of the acquisitions and renewals that
                                               # follow (SP-46: a group's share.record.lock.duration.ms);
                                               # None (the default): record_lock_duration_ms
  kafka-4.4 only (the constructor also takes renew_acknowledge_enable=True, dead_letter_queue=False):
    partition.alter_config({"delivery_count_limit": 3, ...})
                                               # the group's configs changed (SP-70, SP-72, SP-73); keys
                                               # GROUP_CONFIG_KEYS; ValueError for a bad one
    partition.dead_lettered(first, last, seen_later=False)
                                               # phase 2 of the dead-letter queue finished for the archiving
                                               # records of [first, last]: archived (SP-74); seen_later: a
                                               # later observation showed it, at a time unknown

`acquire`, `acknowledge` and `leave` fire the expired locks themselves; call
`advance(at_ms)` before `append`. A Violation from `acquire` leaves the model as
it was. Read-only: `spso`, `speo` (exclusive), `speo_clause` (the clause that put
SPEO there), `log_end_offset`, `state_of`, `delivery_count_of`, `owner_of`,
`lock_deadline_of` (None unless acquired) of an offset in the window, `snapshot()` (runs [first, last, state, delivery_count]),
`deciding_clause(offset)`, `log_batch_of(offset)` and `compare_snapshot(states)` (SP-25).
`acquisition_violation(partition, max_records, records)` and
`snapshot_violation(partition, states)` explain a refusal (Violation or None)
from that read-only API alone, for this class and the fast acceptor alike.
`runs_of(offsets, count_of)` groups ascending offsets into runs [first, last, count_of(offset)].
`loaded_runs(initial_state, start_offset)` validates an `initial_state`
(ValueError with the reason) and returns its runs as tuples.
`kafka_range_violation(config, profile)` names a Kafka profile's setting that that
Kafka would refuse (SP-45, SP-71); the model itself takes any positive setting, as tests do.
`partition.archiving_runs()` and `dead_letters_seen(partition, spso, stored_spso, states)` say which
records are archiving (SP-73), and which of them a check shows past phase 2 (SP-74).

The partition is written as the KIP's text. Where Apache Kafka 4.2 departs from
it (the clauses marked `profile: kafka-4.2`), the KIP's rule is one member of
`KipRules` and Kafka's is the same member of `Kafka42Rules`, which extends it
(at the end of this module); where Kafka 4.4 departs from Kafka 4.2 (the clauses
marked `profile: kafka-4.4` alone), `Kafka44Rules` extends `Kafka42Rules` in the
same way. The partition asks the rules of its profile (`partition.rules`). The KIP
has no trace steps for Kafka's log (SP-60; its transactions, log start and
compaction are SP-61..SP-65), and Kafka 4.2 none for a group's configs changing
or its dead-letter queue (SP-70..SP-74).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from typing import AbstractSet as Set, Callable, Mapping, Sequence

from kipcheck.model.errors import Error
from kipcheck.model.profiles import KAFKA_42, KAFKA_44, KIP, PROFILES
from kipcheck.model.share_partition_log import LogFacts, kafka_only
from kipcheck.model.violation import Ruled, Violation

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "available", "acquired", "acknowledged", "archived"
ARCHIVING = "archiving"  # SP-73: Kafka 4.4, a record on its way to the dead-letter queue (phase 1 done)
STATES = (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED)
LOADABLE_STATES = (AVAILABLE, ACKNOWLEDGED, ARCHIVED)  # SP-26: acquired is never persisted
TERMINAL = (ACKNOWLEDGED, ARCHIVED)  # SP-1 (SP-73: archiving is not terminal)
# SP-70: the group configs Kafka 4.4 reads at each transition, by their trace names.
GROUP_CONFIG_KEYS = ("delivery_count_limit", "max_inflight_records", "renew_acknowledge_enable", "dead_letter_queue")
# SP-72, SP-73: a group renews unless told otherwise, and has no dead-letter queue.
GROUP_CONFIG_DEFAULTS = {"renew_acknowledge_enable": True, "dead_letter_queue": False}
ACK_TYPES = ("accept", "release", "reject", "gap", "renew")
# SP-9: accept, release, reject. SP-12: Kafka 4.2 archives a gap. SP-41: a renewal keeps the record acquired.
ACK_TARGET = {"accept": ACKNOWLEDGED, "release": AVAILABLE, "reject": ARCHIVED, "gap": ARCHIVED, "renew": ACQUIRED}
# The answers an acknowledgement can get, each with the clause that decides it.
ACCEPTED = Ruled(Error.NONE, "SP-9")
MALFORMED_REQUEST = Ruled(Error.INVALID_REQUEST, "SP-10")
SHARED_OFFSET = Ruled(Error.INVALID_RECORD_STATE, "SP-11")
PAST_THE_END = Ruled(Error.INVALID_REQUEST, "SP-13")
KAFKA_PAST_THE_END = Ruled(Error.INVALID_REQUEST, "SP-14")
KAFKA_NOT_CACHED = Ruled(Error.INVALID_RECORD_STATE, "SP-14")
NOT_ACQUIRED = Ruled(Error.INVALID_RECORD_STATE, "SP-15")
LOCK_EXPIRED = Ruled(Error.REQUEST_TIMED_OUT, "SP-16")
KAFKA_LOCK_EXPIRED = Ruled(Error.INVALID_RECORD_STATE, "SP-17")
SHARED_OFFSET_SKIPPED = Ruled(Error.NONE, "SP-11")
RENEW_NOT_ANNOUNCED = Ruled(Error.INVALID_REQUEST, "SP-41")
RENEWAL_SHARES_OFFSET = Ruled(Error.NONE, "SP-41")
ACCEPTED_IN_PROGRESS = Ruled(Error.NONE, "SP-44")
KAFKA_HOLE = Ruled(Error.INVALID_REQUEST, "SP-14")
RENEW_DISABLED = Ruled(Error.INVALID_RECORD_STATE, "SP-72")
# SP-40: a batch straddling SPSO when no cached record is at SPSO. Kafka 4.2 fails the whole request
# (a NullPointerException); `straddle_npe="flag"` expects the answer Kafka gives such a batch not straddling SPSO.
STRADDLE_NPE = {"accept": Ruled(Error.UNKNOWN_SERVER_ERROR, "SP-40"), "flag": Ruled(Error.INVALID_RECORD_STATE, "SP-40")}


class RecentOffsets:
    """The offsets most recently added, as at most RUNS_MAX runs: the records archived at the delivery limit
    (SP-21) and those whose dead-letter phase 2 finished (SP-74). The window forgets a record SPSO has passed,
    and a trace may be endless, so only the latest runs are kept: read only to name SP-21 when such a record is
    acquired again (older ones name SP-3), and to let a dead_lettered repeat what a check already showed."""

    RUNS_MAX = 1024

    def __init__(self) -> None:
        self._runs: deque[list[int]] = deque(maxlen=self.RUNS_MAX)

    def add(self, offset: int) -> None:
        if self._runs and self._runs[-1][1] == offset - 1:
            self._runs[-1][1] = offset
        else:
            self._runs.append([offset, offset])

    def __contains__(self, offset: int) -> bool:
        return any(first <= offset <= last for first, last in self._runs)


class StoredStart:
    """SP-47: the SPSO the share coordinator holds for the share-partition (what DescribeShareGroupOffsets
    answers), as a range [low, high]: a state write carries one SPSO value, and the model knows it exactly
    or only within the values SPSO took during the write. Before the first write the trace cannot know what
    was stored: -1 (nothing yet), the start offset the share-partition was initialized with, or, for one
    reloaded after a restart, what the last write before it carried, which may lag SPSO: any of them."""

    def __init__(self, start_offset: int) -> None:
        self.low, self.high = -1, start_offset

    def wrote(self, low: int, high: int) -> None:
        """A write the answer waited for: once answered, it is stored."""
        self.low, self.high = low, high

    def writing(self, low: int, high: int) -> None:
        """A write no answer waits for (a lock's expiry, a session's end): until a later write that an answer
        waited for, what was stored before may still be there."""
        self.high = high

    def allows(self, value: int) -> bool:
        return self.low <= value <= self.high

    def expected(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}..{self.high}"


@dataclass
class Record:
    """SP-1: one in-flight record. Owner and lock deadline are set only while it is acquired."""

    state: str = AVAILABLE
    delivery_count: int = 0
    owner: str | None = None
    lock_deadline_ms: int | None = None
    timed_out_owner: str | None = None  # SP-16: whose lock expired, until the record is acquired again
    loaded: bool = False  # SP-26: as initial_state gave it, not acquired since
    archived_by: str | None = None  # SP-63, SP-65: the clause that archived it without an acknowledgement
    write_failed: bool = False  # SP-27: an acknowledgement of it failed on storage since it was acquired
    renewed: bool = False  # SP-41: its lock was renewed since it was acquired
    step_lock: bool = False  # SP-46: its lock took the duration a step gave, not the configured one


def loaded_runs(initial_state: Sequence, start_offset: int,
                loadable: Sequence[str] = LOADABLE_STATES) -> list[tuple[int, int, str, int]]:
    """SP-26: `initial_state` as (first, last, state, delivery_count) tuples; ValueError says what is wrong.
    `loadable`: the states the profile persists (its rules' `loadable_states`)."""
    runs: list[tuple[int, int, str, int]] = []
    previous_last = start_offset - 1
    for number, run in enumerate(initial_state, 1):
        where = f"initial_state run {number} {run!r}"
        if not isinstance(run, (list, tuple)) or len(run) != 4:
            raise ValueError(f"{where}: a run is [first, last, state, delivery_count]")
        first, last, state, count = run
        if not all(type(value) is int for value in (first, last, count)) or count < 0:
            raise ValueError(f"{where}: first, last and delivery_count must be integers, delivery_count >= 0")
        if state not in loadable:
            raise ValueError(f"{where}: state must be one of {', '.join(loadable)} (acquired is never persisted)")
        if first > last:
            raise ValueError(f"{where}: first must be <= last")
        if first <= previous_last:
            raise ValueError(f"{where}: runs must be ascending, non-overlapping and start at or above "
                             f"start_offset {start_offset}")
        # The state constant itself, not an equal string: the fast acceptor compares states by identity.
        runs.append((first, last, loadable[list(loadable).index(state)], count))
        previous_last = last
    return runs


def acknowledgement_answer(batches: Sequence[tuple[int, int, str]], profile: str, actor: str, spso: int, speo: int,
                           not_owned_error: Callable[[str, int, int], Ruled | None], holes: Set[int] = frozenset(),
                           straddle_npe: str = "accept", renew: bool = False,
                           renew_enabled: bool = True, cached_below: bool = False) -> tuple[Ruled, int]:
    """The one answer to a request of batches (first, last, type) against the window [spso, speo), and how
    many batches came before the one that failed (all of them when none did); `renew`: the request
    announced renewals (IsRenewAck). `not_owned_error(actor, first, last)` judges the records of one
    batch inside the window. `holes` (kafka-4.2): offsets of the window not in Kafka's cache (SP-14,
    SP-65); `cached_below` (kafka-4.2): Kafka's cache holds records below SPSO (SP-66). `renew_enabled`
    (kafka-4.4): the group's share.renew.acknowledge.enable (SP-72). Judged by the rules of `profile`
    (KipRules, Kafka42Rules, Kafka44Rules)."""
    return RULES[profile].acknowledgement_answer(batches, actor, spso, speo, not_owned_error, holes, straddle_npe,
                                                 renew, renew_enabled, cached_below)


def acknowledged_in_progress(partition, at_ms: int, actor: str, batches: Sequence[tuple[int, int, str]], renew: bool,
                             received_ms: int) -> Ruled:
    """SP-44: a request received at `received_ms` and answered at `at_ms` is judged as at `received_ms`;
    the locks of the records still acquired then fire once it is answered."""
    ruled = partition.acknowledge(min(received_ms, at_ms), actor, batches, renew)
    partition.advance(at_ms)
    return ACCEPTED_IN_PROGRESS if ruled.value == Error.NONE else ruled


def nothing_cached(spso: int, speo: int, stranded: Mapping, cached_below: int | None) -> bool:
    """SP-66: Kafka's cache of in-flight batches is empty: no record in the window [spso, speo), none left
    acquired below SPSO (`stranded`), and no record cached below it (`cached_below` None)."""
    return spso == speo and not stranded and cached_below is None


def start_below_log_start(partition, stranded: Mapping, cached_below: int | None) -> int | None:
    """SP-64: where Kafka 4.2 starts new records below SPSO, or None. When the log start offset moved inside a
    log batch past SPEO, a fetch from SPEO returns that whole batch; Kafka moves the batch's base offset up to
    SPSO only when its cache holds nothing below the batch, so while it still caches records below (`stranded`
    acquired ones, or others up to `cached_below`) the new records start at the batch's first offset, below the
    log start offset."""
    spso = partition.spso
    if not RULES[partition.profile].writes_move_start or spso != partition.speo or spso >= partition.log_end_offset:
        return None
    first, _ = partition.log_batch_of(spso)
    if first >= spso or not (stranded or cached_below is not None):
        return None
    if (cached_below or 0) > first or any(offset >= first for offset in stranded):
        return None  # a cached batch reaches the fetched one: Kafka's floor entry, not this case
    return first


def renewals_standing(batches: Sequence[tuple[int, int, str]], ruled: Ruled, handled: int,
                      failed_at: Callable[[int, int], int]) -> list[tuple[int, int, str]]:
    """SP-41: the renewals a request answered `ruled` (not NONE) leaves standing, `handled` batches having
    come before the failing one: those batches' renewals, and, when the failing batch is a renewal that
    failed on one of its records (SP-15, SP-17), its records before that one (`failed_at(first, last)`:
    the offset of that record). Kafka restarts each lock as it goes and never rolls one back."""
    standing = [batch for batch in batches[:handled] if batch[2] == "renew"]
    if handled < len(batches) and batches[handled][2] == "renew" and ruled.clause in ("SP-15", "SP-17"):
        first, last, _ = batches[handled]
        stop = failed_at(first, last)
        if stop > first:
            standing.append((first, stop - 1, "renew"))
    return standing


def failing_record(actor: str, first: int, last: int, spso: int, holes: Set[int],
                   not_owned_error: Callable[[str, int, int], Ruled | None]) -> int:
    """SP-41: the offset of the first record of the batch [first, last] the actor cannot acknowledge, in the
    order Kafka checks them (SP-14: from the cached record before a hole it starts in), or last + 1."""
    start = max(first, spso)
    if start in holes:
        before = _cached_before(start, holes)
        if before >= spso and not_owned_error(actor, before, before) is not None:
            return start
    for run_first, run_last in cached_runs(start, last, holes):
        for offset in range(run_first, run_last + 1):
            if not_owned_error(actor, offset, offset) is not None:
                return offset
    return last + 1


def _kafka_lookup_error(first: int, last: int, spso: int, speo: int, holes: Set[int], straddle_npe: str,
                        cached_below: bool = False) -> Ruled | None:
    """SP-14, SP-40: Kafka 4.2's search of its cache for a batch reaching SPSO (fetchSubMapForAcknowledgementBatch).
    The cache holds the window's records except the holes, and, when `cached_below`, records below SPSO (SP-66),
    which it finds at or before any offset of such a batch."""
    if not cached_below and (spso == speo or (holes and all(
            offset in holes for offset in range(spso, min(max(first, spso), speo - 1) + 1)))):
        # No cached batch at or before the batch's first offset (or SPSO).
        return STRADDLE_NPE[straddle_npe] if first < spso else KAFKA_NOT_CACHED  # SP-40, SP-14
    if last >= speo:
        return KAFKA_PAST_THE_END
    if last in holes:  # SP-14: the last offset is in no cached batch
        return KAFKA_HOLE
    return None


def _kafka_not_owned_error(actor: str, first: int, last: int, spso: int, holes: Set[int],
                           not_owned_error: Callable[[str, int, int], Ruled | None]) -> Ruled | None:
    """SP-14, SP-15: the records of [first, last] in Kafka's cache; a batch starting in a hole is looked up
    from the cached record before it, whose owner Kafka checks too (unless it is below SPSO, SP-66)."""
    if first in holes and _cached_before(first, holes) >= spso:
        first = _cached_before(first, holes)
    for run_first, run_last in cached_runs(first, last, holes):
        ruled = not_owned_error(actor, run_first, run_last)
        if ruled is not None:
            return ruled
    return None


def _cached_before(offset: int, holes: Set[int]) -> int:
    while offset in holes:
        offset -= 1
    return offset


def cached_runs(first: int, last: int, holes: Set[int]) -> list[tuple[int, int]]:
    """The offsets of [first, last] that are not holes, as runs (first, last)."""
    offsets = [offset for offset in range(first, last + 1) if offset not in holes]
    return [(run_first, run_last) for run_first, run_last, _ in runs_of(offsets, lambda _: 0)]


def check_config(start_offset: int, delivery_count_limit: int, record_lock_duration_ms: int,
                 max_inflight_records: int, profile: str, straddle_npe: str = "accept",
                 group_configs: Mapping[str, bool] | None = None) -> None:
    """ValueError unless the configuration describes a share-partition. `group_configs`: the settings only
    Kafka 4.4 has (renew_acknowledge_enable, dead_letter_queue), when given other than by default."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r} (known: {', '.join(PROFILES)})")
    if straddle_npe not in STRADDLE_NPE:
        raise ValueError(f"straddle_npe must be one of {', '.join(STRADDLE_NPE)}, found {straddle_npe!r}")
    if start_offset < 0 or delivery_count_limit < 1 or record_lock_duration_ms < 0 or max_inflight_records < 1:
        raise ValueError("start_offset, record_lock_duration_ms >= 0 and delivery_count_limit, max_inflight_records >= 1")
    if group_configs and not RULES[profile].group_configs:
        raise ValueError(f"{', '.join(group_configs)} {'is' if len(group_configs) == 1 else 'are'} defined only under "
                         f"profile {KAFKA_44} (SP-70)")


def check_group_config(partition, settings: Mapping[str, object]) -> None:
    """SP-70: ValueError unless `settings` can be what a Kafka 4.4 group's configs changed to."""
    if not RULES[partition.profile].group_configs:
        raise ValueError(f"alter_config is defined only under profile {KAFKA_44} (SP-70)")
    unknown = sorted(set(settings) - set(GROUP_CONFIG_KEYS))
    if unknown or not settings:
        raise ValueError(f"alter_config takes one or more of {', '.join(GROUP_CONFIG_KEYS)}"
                         + (f", not {', '.join(unknown)}" if unknown else ""))
    for key, value in settings.items():
        flag = key in GROUP_CONFIG_DEFAULTS
        if (type(value) is not bool) if flag else (type(value) is not int or value < 1):
            raise ValueError(f"{key} must be {'true or false' if flag else 'an integer >= 1'}, found {value!r}")


# SP-45, SP-71: the share-partition settings Apache Kafka accepts (ShareGroupConfig's ConfigDef ranges, and a
# group's configs within them): trace config key -> (Kafka's config name, least, most). A group-level
# share.record.lock.duration.ms is bounded by group.share.min/max.record.lock.duration.ms, whose own ranges
# keep it within the same 1000..3600000.
KAFKA_RANGES = {
    "delivery_count_limit": ("group.share.delivery.count.limit", 2, 10),
    "record_lock_duration_ms": ("group.share.record.lock.duration.ms", 1000, 3600000),
    "max_inflight_records": ("group.share.partition.max.record.locks", 100, 10000),
}
# SP-71: Kafka 4.4's group share.delivery.count.limit lies within group.share.min.delivery.count.limit
# (2..5) and group.share.max.delivery.count.limit (5..25); its share.partition.max.record.locks within
# group.share.min/max.partition.max.record.locks (100..2000, 2000..10000).
KAFKA44_RANGES = {
    **KAFKA_RANGES,
    "delivery_count_limit": ("share.delivery.count.limit, at most group.share.max.delivery.count.limit", 2, 25),
}


def kafka_range_violation(config: Mapping[str, int], profile: str = KAFKA_42) -> Violation | None:
    """SP-45, SP-71: under a Kafka profile, the first setting of `config` that that Kafka refuses; None under kip."""
    ranges = RULES[profile].ranges
    if ranges is None:
        return None
    clause, limits = ranges
    for key, (kafka_name, least, most) in limits.items():
        value = config.get(key)
        if value is not None and not least <= value <= most:
            return Violation(clause, f"{key} in {least}..{most} (Kafka's {kafka_name})", f"{key}={value}")
    return None


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
        self.log = LogFacts(isolation_level, profile)  # SP-61..SP-65: transactions and compaction
        # SP-70: Kafka 4.4 reads these group configs at each transition; alter_config changes them.
        self.delivery_count_limit = delivery_count_limit
        self.max_inflight_records = max_inflight_records
        self.renew_acknowledge_enable = renew_acknowledge_enable  # SP-72
        self.dead_letter_queue = dead_letter_queue  # SP-73
        self.record_lock_duration_ms = record_lock_duration_ms
        self.lock_duration_ms: int | None = None  # SP-46: the duration in force, when a step gives one
        # SP-1: the window starts empty at start_offset.
        self._spso = self._speo = self._log_end = start_offset
        self.speo_clause = "SP-24"  # the clause that put SPEO where it is (SP-42 after a record_limit acquisition)
        # SP-67: the records the acknowledgements of the ShareFetch being judged released, still in transition
        # while Kafka acquired for it (set by `acquire` for its check only).
        self.in_transition: frozenset[int] = frozenset()
        self._records: dict[int, Record] = {}  # offset -> record, for the window [SPSO, SPEO)
        self.limit_archives = RecentOffsets()  # SP-21: read only to name a clause
        self.dead_letters = RecentOffsets()  # SP-74: phase 2 finished for them
        # SP-14, SP-65: offsets of the window not in Kafka's cache: loaded ones no run covers, not acquired
        # since, and ones compaction removed that an acquisition skipped.
        self._holes: set[int] = set()
        # SP-66 (kafka-4.2): what Kafka still caches below SPSO once the log start moved past it: the records
        # left acquired there, and the offset after the highest record cached below SPSO (None: none).
        self._stranded: dict[int, Record] = {}
        self._cached_below: int | None = None
        self.stored_start = StoredStart(start_offset)  # SP-47: read only, but for the state writes below
        self._load(loaded_runs(initial_state, start_offset, self.rules.loadable_states))

    def _load(self, runs: list[tuple[int, int, str, int]]) -> None:
        """SP-26: the window holds the loaded runs; offsets between them are available with count 0."""
        for first, last, state, count in runs:
            for offset in range(self._speo, first):
                self._records[offset] = Record(loaded=True)
                self._holes.add(offset)
            for offset in range(first, last + 1):
                self._records[offset] = Record(state, count, loaded=True)
            self._speo = last + 1
        self._log_end = self._speo  # SP-26: the log end starts at SPEO; appends extend it from there
        self._settle()  # SP-23 holds before the first step too (Kafka moves SPSO once it has loaded the state)

    spso = property(lambda self: self._spso)
    speo = property(lambda self: self._speo)
    log_end_offset = property(lambda self: self._log_end)

    @property
    def rules(self) -> KipRules:
        """The rules where the profiles differ: the KIP's, Kafka 4.2's over them, or Kafka 4.4's over those."""
        return RULES[self.profile]

    def _record(self, offset: int) -> Record:
        if not self._spso <= offset < self._speo:
            raise KeyError(f"offset {offset} is outside the window [{self._spso}, {self._speo})")
        return self._records[offset]

    def _window(self) -> list[tuple[int, Record]]:
        return [(offset, self._records[offset]) for offset in range(self._spso, self._speo)]

    def state_of(self, offset: int) -> str:
        return self._record(offset).state

    def has_available_record(self) -> bool:
        """Whether a record of the window is available (Kafka 4.2 fetches from the first one, SP-65)."""
        return any(record.state == AVAILABLE for _, record in self._window())

    def delivery_count_of(self, offset: int) -> int:
        return self._record(offset).delivery_count

    def owner_of(self, offset: int) -> str | None:
        return self._record(offset).owner

    def lock_deadline_of(self, offset: int) -> int | None:
        return self._record(offset).lock_deadline_ms

    def snapshot(self) -> list[list]:
        """SP-25: the window as runs [first, last, state, delivery_count], ascending."""
        runs: list[list] = []
        for offset, record in self._window():
            if runs and runs[-1][2:] == [record.state, record.delivery_count]:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, record.state, record.delivery_count])
        return runs

    def deciding_clause(self, offset: int) -> str:
        """SP-25: the clause of the rule that put the record in its present state and count; below SPSO,
        SP-21 for a record recently archived at the delivery limit, SP-64 below the log start offset,
        else SP-23 (SPSO passed it: terminal)."""
        if offset < self._spso:
            return below_start_clause(self, offset)
        record = self._record(offset)
        if record.state == ACQUIRED:
            return ("SP-27" if record.write_failed else "SP-46" if record.step_lock else "SP-41" if record.renewed
                    else "SP-4")
        if record.archived_by is not None:
            return record.archived_by
        if record.loaded:  # SP-26: still as initial_state gave it
            return "SP-26"
        if record.state == ARCHIVING:
            return "SP-73"
        if record.state == AVAILABLE and record.delivery_count >= self.delivery_count_limit:
            return "SP-70"  # left available when the group lowered its limit
        if record.state == AVAILABLE and record.timed_out_owner is not None:
            return "SP-20"
        if record.state == AVAILABLE and record.delivery_count == 0:
            return "SP-1"
        if record.state == ARCHIVED and record.delivery_count >= self.delivery_count_limit:
            return "SP-21"
        return "SP-9"

    def compare_snapshot(self, states: Sequence[Sequence]) -> None:
        """SP-25: raise Violation unless `states` (runs [first, last, state, count]) equals the window."""
        violation = snapshot_violation(self, states)
        if violation is not None:
            raise violation

    def advance(self, at_ms: int) -> None:
        """SP-20: fire every lock whose deadline is <= at_ms, before the step's own op."""
        spso, expired = self._spso, False
        for offset, record in self._records.items():
            if record.state == ACQUIRED and record.lock_deadline_ms <= at_ms:
                owner, expired = record.owner, True
                self._release_record(offset)
                if record.state == AVAILABLE:  # SP-16: remember whose lock expired
                    record.timed_out_owner = owner
        for offset in [offset for offset, record in self._stranded.items() if record.lock_deadline_ms <= at_ms]:
            del self._stranded[offset]  # SP-66: below SPSO a lock's expiry archives the record
            expired = True
        if expired:  # SP-47: each expired lock's write carries SPSO as it stood then, and nobody waits for it
            self._settle()
            self.stored_start.writing(spso, self._spso)

    def append(self, count: int, producer: str | None = None) -> None:
        """SP-2: one log batch of `count` records at the log end (SP-61: in `producer`'s open transaction)."""
        if count < 1:
            raise ValueError(f"an append holds at least one record, not {count}")
        self.log.append(self._log_end, count, producer)
        self._log_end += count

    # The log under Kafka 4.2: transactions, the log start offset, compaction (SP-60..SP-65).

    def end_transaction(self, producer: str, result: str) -> None:
        """SP-61: the producer's transaction ends with a control batch of one record at the log end."""
        self.log.end_transaction(producer, result)
        self.append(1)

    def move_log_start(self, at_ms: int, offset: int) -> None:
        """SP-64: the log start offset moved to `offset`; SPSO jumps to it, the records below leave the window
        (SP-66: the acquired ones stay acquired below SPSO, in Kafka's cache with the rest)."""
        check_log_start(self, offset)
        self.advance(at_ms)
        self.log.start_offset = max(self.log.start_offset, offset)
        if offset <= self._spso:  # Kafka ignores a log start offset at or below SPSO
            return
        if offset > self._speo:  # SPEO no longer where an acquisition (SP-42 or not) put it
            self.speo_clause = "SP-24"
        for below in range(self._spso, min(offset, self._speo)):
            record = self._records.pop(below)
            if below not in self._holes:
                self._cached_below = max(self._cached_below or 0, below + 1)
            if record.state == ACQUIRED:
                self._stranded[below] = record
            self._holes.discard(below)
        # SP-66: SPSO is the log start offset now, whatever the record there; it moves on at the next write.
        self._spso, self._speo = offset, max(self._speo, offset)

    def compact(self, at_ms: int, first: int, last: int) -> None:
        """SP-65: compaction removed the whole log batches [first, last]; available records of them are archived."""
        check_compaction(self, first, last)
        self.advance(at_ms)
        self.log.remove(first, last)
        for offset in range(max(first, self._spso), min(last + 1, self._speo)):
            record = self._records[offset]
            if record.state == AVAILABLE:  # SP-66: SPSO moves on past them at the next write
                record.state, record.archived_by = ARCHIVED, "SP-65"

    # A group's configs and its dead-letter queue under Kafka 4.4 (SP-70..SP-74).

    def alter_config(self, settings: Mapping[str, int | bool]) -> None:
        """SP-70: the group's configs changed to `settings` (keys GROUP_CONFIG_KEYS); Kafka 4.4 reads them at
        each transition from now on. Nothing changes at once: a lowered limit archives no available record."""
        check_group_config(self, settings)
        for key, value in settings.items():
            setattr(self, key, value)

    def archiving_runs(self) -> list[tuple[int, int]]:
        """SP-73: the window's archiving records, as runs (first, last)."""
        offsets = [offset for offset, record in self._window() if record.state == ARCHIVING]
        return [(first, last) for first, last, _ in runs_of(offsets, lambda _: 0)]

    def dead_lettered(self, first: int, last: int, seen_later: bool = False) -> None:
        """SP-74: phase 2 of the dead-letter queue finished for [first, last]: its archiving records are archived.
        `seen_later`: a later step showed it, so it finished at some time since they became archiving."""
        spso = self._spso
        for offset in dead_lettered_offsets(self, first, last):
            record = self._records[offset]
            record.state, record.archived_by, record.loaded = ARCHIVED, "SP-74", False
            self.dead_letters.add(offset)
        self._settle()  # phase 2 is a state write: SPSO moves when it completes (SP-66 under Kafka's profiles)
        self.stored_start.writing(*dead_letter_write(self, spso, seen_later))

    # Acquisition.

    def acquirable_ranges(self) -> list[tuple[int, int]]:
        """SP-3: the records that may be acquired now, as inclusive ranges (SP-7 caps new records under kip)."""
        new_first, new_last = self.acquirable_new_records()
        offsets = [offset for offset, record in self._window() if record.state == AVAILABLE]
        return [(first, last) for first, last, _ in runs_of(offsets + list(range(new_first, new_last + 1)), lambda _: 0)]

    def acquirable_new_records(self) -> tuple[int, int]:
        """(first, last) of the never-acquired records that may be acquired now; empty when last < first."""
        return new_records_bounds(self)

    def lowest_acquisition(self, max_records: int, record_limit: bool = False) -> list[list[int]]:
        """One allowed answer: the lowest acquirable records (Kafka 4.2: rounded up to whole new batches,
        or under `record_limit` exactly as many new records as there is room for, SP-42; the records of
        aborted transactions left out, SP-63)."""
        offsets = self._lowest_offsets(max_records, record_limit)
        aborted = {offset for first, last in self.lowest_archived(max_records, record_limit)
                   for offset in range(first, last + 1)}
        return [list(run) for run in runs_of([offset for offset in offsets if offset not in aborted],
                                           self._count_after_acquisition)]

    def lowest_archived(self, max_records: int, record_limit: bool = False) -> list[list[int]]:
        """SP-63: the `archived` runs of the lowest acquisition: its new records of aborted transactions."""
        new = [offset for offset in self._lowest_offsets(max_records, record_limit) if offset >= self._speo]
        return [list(run) for run in self.log.aborted_in(new[0], new[-1])] if new else []

    def _lowest_offsets(self, max_records: int, record_limit: bool) -> list[int]:
        offsets = [offset for first, last in self.acquirable_ranges() for offset in range(first, last + 1)]
        return self.rules.lowest_offsets(self, offsets[:max_records], max_records, record_limit)

    def _count_after_acquisition(self, offset: int) -> int:
        # SP-4: the count goes up by one; a record past SPEO has count 0.
        return self._records[offset].delivery_count + 1 if offset < self._speo else 1

    def check_acquisition(self, max_records: int, records: Sequence[Sequence[int]], record_limit: bool = False,
                          archived: Sequence[Sequence[int]] | None = None) -> None:
        """Raise Violation unless `records` (runs [first, last, delivery_count]) is an allowed acquisition,
        with `archived` (runs [first, last]; None: not observed) its records of aborted transactions (SP-63)."""
        violation = acquisition_violation(self, max_records, records, record_limit, archived)
        if violation is not None:
            raise violation

    def log_batch_of(self, offset: int) -> tuple[int, int]:
        """(first, last) offset of the log batch that holds `offset` (below the log end)."""
        return self.log.batch_of(offset, self._log_end)

    def acquire(self, at_ms: int, actor: str, max_records: int, records: Sequence[Sequence[int]],
                record_limit: bool = False, archived: Sequence[Sequence[int]] | None = None,
                released_beside: frozenset[int] = frozenset()) -> None:
        """Check the observed acquisition (SP-3: it may be empty), then apply it: the model continues from it.
        `record_limit`: Kafka 4.2's record_limit acquire mode (SP-42; batch_optimized otherwise).
        `archived`: the observed runs [first, last] acquired and archived at once (SP-63); None: not observed.
        `released_beside`: the records the acknowledgements of the same ShareFetch released just before (SP-67)."""
        self.advance(at_ms)  # SP-20: locks fire before the op
        self.in_transition = released_beside if self.rules.acknowledges_beside_fetch else frozenset()
        try:
            self.check_acquisition(max_records, records, record_limit, archived)
        finally:
            self.in_transition = frozenset()
        speo, uncached = self._speo, nothing_cached(self._spso, self._speo, self._stranded, self._cached_below)
        records = self._strand_below(records, actor, at_ms + self._lock_duration())
        for first, last in archived_runs(self, records, archived):  # SP-63: acquired, archived with count 1
            self._acquire_run(first, last, 1, actor, None)
            for offset in range(first, last + 1):
                self._records[offset] = Record(ARCHIVED, 1, archived_by="SP-63")
        for first, last, count in records:
            self._acquire_run(first, last, count, actor, at_ms + self._lock_duration())
        if self._speo > speo:
            self.speo_clause = "SP-24"
            if record_limit and self.rules.record_limit_mode:
                # SP-42: the rest of the log batch enters the window, available with count 0.
                _, batch_last = self.log_batch_of(self._speo - 1)
                for offset in range(self._speo, batch_last + 1):
                    self._records[offset] = Record()
                if batch_last >= self._speo:
                    self._speo, self.speo_clause = batch_last + 1, "SP-42"
        if uncached and self.rules.writes_move_start:
            self._start_at_first_cached()

    def start_below(self) -> int | None:
        """SP-64: the offset below SPSO at which Kafka would start new records now, or None."""
        return start_below_log_start(self, self._stranded, self._cached_below)

    def _strand_below(self, records: Sequence[Sequence[int]], actor: str, deadline: int) -> Sequence[Sequence[int]]:
        """SP-64, SP-66: new records acquired below SPSO (start_below) stay acquired there, in Kafka's cache, as
        the ones the log start moved past do; the runs from SPSO on are returned."""
        below = self.start_below()
        if not records or records[0][0] != below:
            return records
        first, last, count = records[0]
        for offset in range(first, self._spso):
            self._stranded[offset] = Record(ACQUIRED, count, actor, deadline,
                                            step_lock=self.lock_duration_ms is not None)
        self._cached_below = max(self._cached_below or 0, self._spso)
        return [[self._spso, last, count], *records[1:]]

    def _start_at_first_cached(self) -> None:
        """SP-66: an acquisition into an empty cache puts SPSO at the first offset it acquired (or archived,
        SP-63), past the batches compaction removed before it (SP-65); or, when the fetch found the log start
        past SPEO (after SPSO went back, SP-66), at that log start offset."""
        if self._spso == self._speo:
            self._spso = self._speo = max(self._speo, self.log.start_offset)
        while self._spso < self._speo and self._spso in self._holes:
            del self._records[self._spso]
            self._holes.discard(self._spso)
            self._spso += 1

    def _acquire_run(self, first: int, last: int, count: int, actor: str, deadline: int | None) -> None:
        # SP-24: SPEO becomes the offset after the highest acquired record;
        # SP-4: records skipped past the old SPEO enter the window available, count 0
        # (SP-65: archived, count 0, where compaction removed them).
        while self._speo <= last:
            removed = self.log.is_removed(self._speo)
            self._records[self._speo] = Record(ARCHIVED, archived_by="SP-65") if removed else Record()
            if removed:  # SP-65: never fetched, so not in Kafka's cache
                self._holes.add(self._speo)
            self._speo += 1
        # SP-4: acquired, owned by the actor, count incremented, locked until at_ms + duration.
        for offset in range(first, last + 1):
            self._records[offset] = Record(ACQUIRED, count, actor, deadline, step_lock=self.lock_duration_ms is not None)
            self._holes.discard(offset)

    def _lock_duration(self) -> int:
        """SP-46: Kafka reads the lock duration each time it starts a lock (a group's config may change it)."""
        return self.record_lock_duration_ms if self.lock_duration_ms is None else self.lock_duration_ms

    # Acknowledgement.

    def acknowledge(self, at_ms: int, actor: str, batches: Sequence[tuple[int, int, str]], renew: bool = False,
                    received_ms: int | None = None) -> Ruled:
        """Judge one request of batches (first, last, type); apply it when the answer is NONE (SP-19).
        `renew`: the request announced renewals (IsRenewAck, SP-41). `received_ms` (kafka-4.2): the request
        was received then and answered at `at_ms`, its records' locks held back meanwhile (SP-44)."""
        if received_ms is not None and self.rules.in_progress_holds_locks:
            return acknowledged_in_progress(self, at_ms, actor, batches, renew, received_ms)
        self.advance(at_ms)  # SP-20: locks fire before the op
        ruled, handled = self.rules.acknowledgement_answer(batches, actor, self._spso, self._speo,
                                                           self._not_owned_error, self._holes, self.straddle_npe, renew,
                                                           self.renew_acknowledge_enable, self._cached_below is not None)
        if ruled.value == Error.NONE:
            applied = batches
        else:  # SP-19: a failed request changes nothing, but SP-41: the renewals done before it failed stand
            # (Kafka restarts a lock at once and never rolls it back); SP-72: a group refusing renewals renews none.
            applied = renewals_standing(
                batches, ruled, handled,
                lambda first, last: failing_record(actor, first, last, self._spso, self._holes, self._not_owned_error)
            ) if self.renew_acknowledge_enable else []
        spso = self._spso
        for first, last, ack_type in applied:
            # SP-9: a rejected record is archived (SP-73: archiving, on its way to the dead-letter queue).
            target = self.rules.archive_state(self) if ack_type == "reject" else ACK_TARGET[ack_type]
            # SP-18: Kafka skips offsets below SPSO (under kip they were refused, SP-15);
            # SP-14: and the holes inside a batch, which are not in its cache.
            for offset in range(max(first, self._spso), last + 1):
                if offset not in self._holes:
                    self._acknowledge_record(offset, target, at_ms)
        if any(ack_type != "renew" and last >= spso for _, last, ack_type in applied):  # SP-47 (SP-41: no write)
            self._settle()
            self.stored_start.wrote(*self.rules.stored_by_request(spso, self._spso))
        return ruled

    def storage_failure(self, at_ms: int, actor: str, batches: Sequence[tuple[int, int, str]],
                        renew: bool = False) -> None:
        """SP-27: an acknowledgement answered with a storage error changes no record, but its renewals
        stand (SP-41, kafka-4.2); as at every step, the locks expired by `at_ms` fire first (SP-20), and
        that transition is kept."""
        self.advance(at_ms)
        renew = renew and self.rules.renews and self.renew_acknowledge_enable  # SP-72: no renewal when disabled
        for first, last, ack_type in batches:  # remembered only to name SP-27 if a check finds them changed
            for offset in range(max(first, self._spso), min(last + 1, self._speo)):
                if self._records[offset].owner == actor:
                    self._records[offset].write_failed = True
                    if renew and ack_type == "renew":  # SP-41: a renewal is not written, and stands
                        self._acknowledge_record(offset, ACQUIRED, at_ms)

    def _not_owned_error(self, actor: str, first: int, last: int) -> Ruled | None:
        """SP-15: the error for the first record in [first, last] the actor has not acquired; None if none."""
        for offset in range(first, last + 1):
            record = self._records[offset]
            if record.owner == actor:  # the owner is set only while a record is acquired
                continue
            if record.state == AVAILABLE and record.timed_out_owner == actor:
                return self.rules.lock_expired  # SP-16, SP-17
            return NOT_ACQUIRED
        return None

    def _acknowledge_record(self, offset: int, target: str, at_ms: int) -> None:
        # SP-9: accept -> acknowledged, release -> available, reject -> archived (SP-12: gap -> archived;
        # SP-73: reject -> archiving under a dead-letter queue); count kept.
        if target == ACQUIRED:  # SP-41: renew restarts the lock (SP-46: as long as now); owner, state, count kept
            record = self._records[offset]
            record.lock_deadline_ms, record.renewed = at_ms + self._lock_duration(), True
            record.step_lock = self.lock_duration_ms is not None
        elif target == AVAILABLE:
            self._release_record(offset)
        else:
            record = self._records[offset]
            record.state, record.owner, record.lock_deadline_ms = target, None, None

    def _release_record(self, offset: int) -> None:
        # SP-9 / SP-20 / SP-22: back to available with the count kept;
        # SP-21: archived instead once the count has reached the limit (SP-70: the limit in force now;
        # SP-73: archiving under a dead-letter queue).
        record = self._records[offset]
        record.owner = record.lock_deadline_ms = None
        if record.delivery_count >= self.delivery_count_limit:
            record.state = self.rules.archive_state(self)
            self.limit_archives.add(offset)
        else:
            record.state = AVAILABLE

    def leave(self, at_ms: int, actor: str) -> None:
        """SP-22: the actor's session ended; its acquired records are released, counts kept."""
        self.advance(at_ms)
        spso, held = self._spso, False
        for offset, record in self._records.items():
            if record.owner == actor:
                self._release_record(offset)
                held = True
        for offset in [offset for offset, record in self._stranded.items() if record.owner == actor]:
            del self._stranded[offset]  # SP-66: below SPSO a released record is archived
            held = True
        if held:  # SP-47: the release is written, and the session's last answer does not wait for it
            self._settle()
            self.stored_start.writing(*self.rules.stored_by_request(spso, self._spso))

    def _settle(self) -> None:
        """SPSO after a step that wrote the share state (SP-23): under the Kafka profiles as Kafka moves it (SP-66)."""
        if not self.rules.writes_move_start:
            self._advance_start()
        elif self._stranded:  # SP-66: a record still acquired below SPSO holds it where it is
            return
        elif all(offset in self._holes for offset in range(self._spso, self._speo)):  # nothing cached from SPSO on
            if self._cached_below is not None:  # SP-66: Kafka's start offset goes back to its last cached offset + 1
                self._records.clear()
                self._holes.clear()
                self._spso = self._speo = self._cached_below
                self._cached_below = None
        elif self._advance_start():  # passing the records below SPSO, Kafka's cache lets them go
            self._cached_below = None

    def _advance_start(self) -> bool:
        """SP-23: SPSO passes the longest prefix of terminal records (SP-65: and of offsets compaction removed)
        and stops at the first non-terminal one; whether it moved."""
        spso = self._spso
        # SP-24: SPEO is never below SPSO (the loop stops at SPEO).
        while self._spso < self._speo and self._records[self._spso].state in TERMINAL:
            del self._records[self._spso]
            self._holes.discard(self._spso)
            self._spso += 1
        return self._spso > spso


# Explanations. They read a partition only through its read-only API (spso, speo, log_end_offset,
# state_of, delivery_count_of, owner_of, deciding_clause, log_batch_of and the settings), so the fast
# acceptor (oracle/judges/fast/share_partition.py) explains its refusals with these very words.

def new_records_bounds(partition) -> tuple[int, int]:
    """(first, last) of the never-acquired records that may be acquired now; empty when last < first."""
    return RULES[partition.profile].new_records_bounds(partition)


def archived_runs(partition, records: Sequence[Sequence[int]],
                  archived: Sequence[Sequence[int]] | None) -> list[tuple[int, int]]:
    """SP-63: the runs an allowed acquisition archived at once: as observed, or, when not observed, the
    records of aborted transactions between SPEO and its last new record."""
    if archived is not None:
        return [(first, last) for first, last in archived]
    last_new = max((last for _, last, _ in records if last >= partition.speo), default=None)
    return partition.log.aborted_in(partition.speo, last_new) if last_new is not None else []


def check_log_start(partition, offset: int) -> None:
    """SP-64: ValueError unless `offset` can be the partition's log start offset."""
    kafka_only("log_start", partition.profile)
    if not 0 <= offset <= partition.log_end_offset:
        raise ValueError(f"the log start offset {offset} must be in [0, log end {partition.log_end_offset}]")


def check_compaction(partition, first: int, last: int) -> None:
    """SP-65: ValueError unless [first, last] is a range of the log."""
    kafka_only("compact", partition.profile)
    if not 0 <= first <= last < partition.log_end_offset:
        raise ValueError(f"compact [{first}, {last}] must be a range of the log [0, {partition.log_end_offset})")


def acquisition_violation(partition, max_records: int, records: Sequence[Sequence[int]], record_limit: bool = False,
                          archived: Sequence[Sequence[int]] | None = None) -> Violation | None:
    """Why `records` (runs [first, last, delivery_count]) with `archived` (runs [first, last] of aborted
    transactions, SP-63; None: not observed) is not an allowed acquisition now; None if it is.
    `record_limit`: Kafka 4.2's record_limit acquire mode (SP-42)."""
    spso, speo = partition.spso, partition.speo
    previous_last, total = spso - 1, 0
    new_runs: list[tuple[int, int]] = []  # the parts of the runs at or past SPEO
    below = partition.start_below()
    if records and records[0][0] == below:  # SP-64: new records from below the log start offset, count 1
        first, last, count = records[0]
        if count != 1 or last < spso:
            return Violation("SP-64", f"new records [{below}, ...] with delivery count 1 reaching SPSO {spso}",
                             f"run [{first}, {last}] with delivery count {count}")
        records, total = [[spso, last, count], *records[1:]], spso - first
    for first, last, count in records:
        # SP-3: ascending runs, each record once, within [SPSO, log end).
        if first < spso and previous_last == spso - 1:  # the first run starts below SPSO
            return _below_start_violation(partition, first, last, count)
        if first > last or first <= previous_last:
            return Violation("SP-3", f"ascending, non-overlapping runs after offset {previous_last}",
                             f"run [{first}, {last}]")
        if first < partition.log.start_offset:  # SP-66: SPSO may go back below the log start offset
            return Violation("SP-64", f"records at or above the log start offset {partition.log.start_offset}",
                             f"run [{first}, {last}]")
        violation = _log_end_violation(partition, first, last) or _run_violation(partition, first, last, count)
        if violation is not None:
            return violation
        if last >= speo:
            new_runs.append((max(first, speo), last))
        total += last + 1 - first
        previous_last = last
    return RULES[partition.profile].limits_violation(partition, max_records, records, total, new_runs, record_limit,
                                                   archived)


def below_start_clause(partition, offset: int) -> str:
    """The clause that put `offset`, below SPSO, out of reach: SP-21 (recently archived at the delivery
    limit), SP-64 (below the log start offset) or SP-23 (SPSO passed it: terminal)."""
    if offset in partition.limit_archives:
        return "SP-21"
    return "SP-64" if offset < partition.log.start_offset else "SP-23"


def _below_start_violation(partition, first: int, last: int, count: int) -> Violation:
    """The first run starts below SPSO, which passes only terminal records (SP-23)."""
    clause = partition.deciding_clause(first)
    if clause == "SP-21":  # the delivery limit, not a mere position, forbids it
        return _limit_violation(partition, first, count)
    if clause == "SP-64":
        return Violation("SP-64", f"records at or above the log start offset {partition.log.start_offset}",
                         f"run [{first}, {last}]")
    return Violation("SP-3", f"records at or above SPSO {partition.spso} (record {first} is below it: terminal, "
                             f"or before the start offset)", f"run [{first}, {last}]")


def _limit_violation(partition, offset: int, count: int) -> Violation:
    return Violation("SP-21", f"no further delivery of record {offset}: archived at the delivery limit "
                              f"{partition.delivery_count_limit}", f"record {offset} acquired again (delivery count {count})")


def _run_violation(partition, first: int, last: int, count: int) -> Violation | None:
    speo = partition.speo
    for offset in range(first, min(last + 1, speo)):  # SP-3: records in the window must be available
        state = partition.state_of(offset)
        if state == AVAILABLE:
            continue
        clause = partition.deciding_clause(offset)
        if clause == "SP-21":  # the delivery limit, not a mere state, forbids it
            return _limit_violation(partition, offset, count)
        if clause in ("SP-63", "SP-65"):  # archived without an acknowledgement
            return Violation(clause, f"available records only (record {offset} is archived: "
                                     f"{'an aborted transaction' if clause == 'SP-63' else 'compacted away'})",
                             f"record {offset} acquired")
        if state == ARCHIVING:  # SP-73: on its way to the dead-letter queue
            return Violation("SP-73", f"available records only (record {offset} is archiving: on its way to the "
                                      f"dead-letter queue)", f"record {offset} acquired")
        holder = f" by {partition.owner_of(offset)}, locked until {partition.lock_deadline_of(offset)} ms" \
            if state == ACQUIRED else ""
        return Violation("SP-3", f"available records only (record {offset} is {state}{holder})",
                         f"record {offset} acquired")
    for offset in range(first, last + 1):  # SP-4: the observed count is the stored count plus one
        expected = partition.delivery_count_of(offset) + 1 if offset < speo else 1
        if count != expected:
            return Violation("SP-4", f"record {offset} with delivery count {expected}",
                             f"record {offset} with delivery count {count}")
    return None


def throttle_threshold(delivery_count_limit: int) -> int:
    """SP-43: the delivery count from which Kafka 4.2 throttles a record's redelivery."""
    return max(2, -(-delivery_count_limit // 2))


def throttle_violation(partition, records: Sequence[Sequence[int]], total: int, new_records: bool) -> Violation | None:
    """SP-43: Kafka 4.2 delivers a record on its last attempt alone, acquires nothing new with a record whose
    redelivery it throttles (delivered `throttle_threshold` times or more before), and stops before a
    throttled record it meets after acquiring others: nothing above one it left available."""
    limit, threshold = partition.delivery_count_limit, throttle_threshold(partition.delivery_count_limit)
    highest = max(count for _, _, count in records)
    if limit > 2 and highest == limit and total > 1:
        return Violation("SP-43", f"a record on its last delivery ({limit}) acquired alone",
                         f"{total} records, one with delivery count {limit}")
    if new_records and highest > threshold:
        return Violation("SP-43", f"no new record with a redelivery throttled (delivered {threshold} times or more)",
                         f"new records beside a record with delivery count {highest}")
    skipped = throttled_left_below(partition, records, threshold)
    if skipped is not None:
        return Violation("SP-43", f"no record above {skipped}, a redelivery throttled (delivered "
                                  f"{partition.delivery_count_of(skipped)} times) and left available",
                         f"records up to {records[-1][1]}")
    return None


def throttled_left_below(partition, records: Sequence[Sequence[int]], threshold: int) -> int | None:
    """SP-43: the lowest available record delivered `threshold` times or more that the acquisition `records`
    leaves out below its last record (Kafka ends an acquisition at such a record); None if there is none.
    SP-67: a record the same ShareFetch's acknowledgements released may still have been in transition: not counted."""
    acquired = {offset for first, last, _ in records for offset in range(first, last + 1)}
    for offset in range(partition.spso, min(records[-1][1], partition.speo)):
        if (offset not in acquired and offset not in partition.in_transition and partition.state_of(offset) == AVAILABLE
                and partition.delivery_count_of(offset) >= threshold):
            return offset
    return None


def _log_end_violation(partition, first: int, last: int) -> Violation | None:
    """SP-3: records below the log end; SP-62: under read_committed, below the last stable offset."""
    log_end = partition.log_end_offset
    stable = partition.log.last_stable_offset(log_end)
    if partition.log.read_committed and last >= stable:
        return Violation("SP-62", f"records below the last stable offset {stable} (read_committed)",
                         f"run [{first}, {last}]")
    if last >= log_end:
        return Violation("SP-3", f"records below the log end {log_end}", f"run [{first}, {last}]")
    return None


def _archived_violation(partition, records: Sequence[Sequence[int]], archived: Sequence[Sequence[int]] | None,
                        new_runs: list[tuple[int, int]]) -> Violation | None:
    """SP-63: the new records of aborted transactions are archived, never among the acquired records."""
    for first, last, _ in records:
        aborted = partition.log.aborted_in(max(first, partition.speo), last)
        if aborted:
            return Violation("SP-63", "records of aborted transactions archived, not acquired (read_committed)",
                             f"records {aborted[0][0]}-{aborted[0][1]} acquired")
    if archived is None:
        return None
    previous_last = partition.speo - 1
    for first, last in archived:
        violation = _log_end_violation(partition, first, last)
        if violation is not None:
            return violation
        # Every record of the run aborted: its adjacent aborted batches may come as one run, as runs go.
        if first <= previous_last or first > last or _merged(partition.log.aborted_in(first, last)) != [[first, last]]:
            return Violation("SP-63", f"archived runs of aborted transactions past SPEO {partition.speo}, ascending",
                             f"archived [{first}, {last}]")
        previous_last = last
    span_last = max([last for _, last in new_runs] + [last for _, last in archived], default=None)
    if span_last is None:
        return None
    expected = partition.log.aborted_in(partition.speo, span_last)
    if _merged(archived) != _merged(expected):
        return Violation("SP-63", f"archived {_merged(expected)}: every aborted record acquired is archived",
                         f"archived {_merged(archived)}")
    return None


def _merged(runs: Sequence[Sequence[int]]) -> list[list[int]]:
    merged: list[list[int]] = []
    for first, last in runs:
        if merged and first == merged[-1][1] + 1:
            merged[-1][1] = last
        else:
            merged.append([first, last])
    return merged


def _new_batches_violation(partition, max_records: int, reacquired: int, new_runs: list[tuple[int, int]],
                           record_limit: bool) -> Violation | None:
    spso, speo = partition.spso, partition.speo
    new_first, new_last = new_runs[0][0], new_runs[-1][1]
    window = speo - spso
    if window >= partition.max_inflight_records:  # SP-8
        return Violation("SP-8", f"no record past SPEO {speo} with {window} records in flight",
                         f"records {new_first}-{new_last}")
    for (_, last), (first, run_last) in zip(new_runs, new_runs[1:]):  # SP-6: one contiguous run
        if first != last + 1:
            return Violation("SP-6", f"new records contiguous from {new_first}", f"run [{first}, {run_last}]")
    # SP-6: new records are whole log batches from SPEO (SP-65: from past the batches compaction
    # removed), overshooting only to complete a batch.
    room = min(max_records, partition.max_inflight_records - window) - reacquired
    start, _ = new_records_bounds(partition)
    if new_first != start:
        return Violation("SP-6", f"new records starting at {'SPEO ' if start == speo else ''}{start}",
                         f"new records from {new_first}")
    batch_first, batch_last = partition.log_batch_of(new_last)
    if record_limit:  # SP-42: exactly the room left, or fewer ending at a log batch's end (the fetched data's)
        count = new_last + 1 - start
        if count > room or (count < room and batch_last != new_last):
            return Violation("SP-42", f"{max(room, 0)} new records from {'SPEO ' if start == speo else ''}{start}, "
                                      f"or fewer ending at the end of a log batch", f"records {new_first}-{new_last}")
        return None
    if batch_last != new_last:
        return Violation("SP-6", "new records ending at the end of a log batch", f"new records ending at {new_last}")
    if room <= 0 or batch_first - start >= room:
        return Violation("SP-6", f"whole log batches from {start}, the last one starting below {start + max(room, 0)}",
                         f"records {new_first}-{new_last} (last batch from {batch_first})")
    return None


def snapshot_violation(partition, states: Sequence[Sequence]) -> Violation | None:
    """SP-25: why `states` (runs [first, last, state, count]) differs from the window; None if it does not."""
    spso, speo = partition.spso, partition.speo
    expected_first = spso
    for first, last, state, count in states:
        if first != expected_first or last < first or last >= speo:
            return Violation("SP-25", f"runs ascending and covering [{spso}, {speo}) exactly",
                             f"run [{first}, {last}] after offset {expected_first - 1}")
        for offset in range(first, last + 1):
            stored_state, stored_count = partition.state_of(offset), partition.delivery_count_of(offset)
            if (stored_state, stored_count) != (state, count):
                # The clause of the rule that put the record there; a count alone is SP-4's (SP-26's if loaded).
                clause = partition.deciding_clause(offset)
                if stored_state == state and clause != "SP-26":
                    clause = "SP-4"
                return Violation(clause, f"record {offset} {stored_state} with delivery count {stored_count}",
                                 f"record {offset} {state} with delivery count {count}")
        expected_first = last + 1
    if expected_first != speo:
        return Violation("SP-25", f"runs covering [{spso}, {speo})", f"runs ending at {expected_first - 1}")
    return None


def runs_of(offsets: list[int], count_of) -> list[tuple[int, int, int]]:
    """Ascending `offsets` as runs (first, last, count_of(offset)) of consecutive offsets with the same count."""
    runs: list[tuple[int, int, int]] = []
    for offset in offsets:
        count = count_of(offset)
        if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
            runs[-1] = (runs[-1][0], offset, count)
        else:
            runs.append((offset, offset, count))
    return runs


def non_default_group_configs(renew_acknowledge_enable: bool, dead_letter_queue: bool) -> dict[str, bool]:
    """The Kafka 4.4 settings (SP-72, SP-73) given other than by default: a profile without them refuses these."""
    given = {"renew_acknowledge_enable": renew_acknowledge_enable, "dead_letter_queue": dead_letter_queue}
    return {key: value for key, value in given.items() if value != GROUP_CONFIG_DEFAULTS[key]}


def dead_letter_write(partition, spso_before: int, seen_later: bool) -> tuple[int, int]:
    """SP-47, SP-74: the SPSO values phase 2's state write may have stored (no answer waits for it), SPSO being
    `spso_before` it. Seen later, it finished at an unknown time, and the writes since may carry any SPSO up to
    the one it lets SPSO reach."""
    if seen_later:
        return spso_before, partition.spso
    return RULES[partition.profile].stored_by_request(spso_before, partition.spso)


def dead_lettered_offsets(partition, first: int, last: int) -> list[int]:
    """SP-74: the archiving records of `dead_lettered [first, last]`, which phase 2 archives. ValueError unless the
    step is one of the partition's profile; Violation unless phase 2 can have finished for every record of the
    range: archiving, or one whose phase 2 an earlier step already showed finished (Kafka may send a record to
    the dead-letter topic again, resuming phase 2 after a reload)."""
    if ARCHIVING not in RULES[partition.profile].states:
        raise ValueError(f"dead_lettered is defined only under profile {KAFKA_44} (SP-74)")
    if not 0 <= first <= last:
        raise ValueError(f"dead_lettered needs 0 <= first <= last, found [{first}, {last}]")
    archiving = []
    for offset in range(first, last + 1):
        state = partition.state_of(offset) if partition.spso <= offset < partition.speo else None
        if state == ARCHIVING:
            archiving.append(offset)
        elif offset not in partition.dead_letters:
            where = f"is {state}" if state is not None else f"is outside the window [{partition.spso}, {partition.speo})"
            raise Violation("SP-74", f"dead-lettered records archiving only (record {offset} {where})",
                            f"dead_lettered [{first}, {last}]")
    return archiving


def dead_letters_seen(partition, spso: int | None, stored_spso: int | None,
                      states: Sequence[Sequence] | None) -> list[tuple[int, int]]:
    """SP-74: the archiving records whose phase 2 a check shows finished (it may finish at any step): those
    below its `spso` or its `stored_spso` (SPSO passed them, SP-47), and those its `states` (runs [first, last,
    state, count]) show archived."""
    passed = max((value for value in (spso, stored_spso) if value is not None), default=None)
    seen = set()
    for first, last in partition.archiving_runs():
        seen.update(offset for offset in range(first, last + 1) if passed is not None and offset < passed)
        for run_first, run_last, state, _ in states or ():
            if state == ARCHIVED:
                seen.update(range(max(first, run_first), min(last, run_last) + 1))
    return [(first, last) for first, last, _ in runs_of(sorted(seen), lambda _: 0)]


def waited_fetch_violation(partition, wait_ms: int, records: Sequence[Sequence[int]]) -> Violation | None:
    """SP-28: a fetch that waited `wait_ms` with no other fetcher of the partition came back empty while
    records were acquirable (after its `at_ms` timers fired); None when the answer is allowed."""
    acquirable = partition.acquirable_ranges()
    if wait_ms > 0 and not records and acquirable:
        return Violation("SP-28", f"some of the acquirable records {acquirable} (the fetch waited {wait_ms} ms)",
                         "records=[]")
    return None


def delivered_violation(partition, records: Sequence[Sequence[int]],
                        delivered: Sequence[Sequence[int]]) -> Violation | None:
    """SP-48: why the records an acquisition's answer sent (`delivered`, runs [first, last] of their offsets in
    the order they came) are not those an acquisition of `records` (runs [first, last, delivery_count], allowed)
    sends; None when they are. Read after the acquisition: it changes neither the log nor its batches."""
    if not records:
        # SP-48: nothing acquired, nothing sent.
        return Violation("SP-48", "no record sent with an acquisition of none",
                         f"records {delivered[0][0]}-{delivered[0][1]} sent") if delivered else None
    previous_last = -1
    for first, last in delivered:  # SP-48: each record once, in the log's order
        if first <= previous_last:
            return Violation("SP-48", f"each record sent once, in ascending offsets (after record {previous_last})",
                             f"records {first}-{last} sent")
        previous_last = last
    firsts = [first for first, _ in delivered]
    for first, last, _ in records:  # SP-48: every acquired record is sent, unless compaction removed it (SP-65)
        for offset in range(first, last + 1):
            index = bisect_right(firsts, offset) - 1
            if (index < 0 or delivered[index][1] < offset) and not partition.log.is_removed(offset):
                return Violation("SP-48", f"acquired record {offset} among the records sent", f"no record {offset}")
    log_end = partition.log_end_offset
    low, _ = partition.log_batch_of(records[0][0])
    _, high = partition.log_batch_of(records[-1][1])
    if delivered and (delivered[0][0] < low or delivered[-1][1] > min(high, log_end - 1)):
        # SP-48: no record outside the log batches from the one holding the first acquired record to the last's.
        outside = delivered[0][0] if delivered[0][0] < low else delivered[-1][1]
        return Violation("SP-48", f"records of the log batches {low}-{high} that hold the acquired ones only",
                         f"record {outside} sent")
    return None


# The profiles. An explanation above reads the rules of a partition by its profile, so that the fast
# acceptor, which has no `rules`, is explained by the same ones.

class KipRules:
    """The KIP's rules where Kafka 4.2 departs from them (the clauses marked `profile: kip`)."""

    lock_expired = LOCK_EXPIRED  # SP-16: acknowledging after the lock expired is a TimeoutException
    # Kafka 4.2's additions, which the KIP has not: the record_limit acquire mode (SP-42), an
    # acknowledgement holding back the locks while it is written (SP-44), RENEW (SP-41), and SPSO moved
    # by the share state's writes over a cache that may hold records below it (SP-66), and a ShareFetch's
    # acknowledgements still being written while it acquires (SP-67).
    record_limit_mode = in_progress_holds_locks = renews = writes_move_start = acknowledges_beside_fetch = False
    start_clause = "SP-23"  # the clause that puts SPSO where it is
    # Kafka 4.4's, which neither has: a group's configs changing (SP-70).
    group_configs = False
    states = STATES  # SP-1: the states of the window
    loadable_states = LOADABLE_STATES  # SP-26
    ranges: tuple[str, Mapping[str, tuple[str, int, int]]] | None = None  # the seed bounds no setting

    def archive_state(self, partition) -> str:
        """The state of a record archived by a rejection (SP-9) or at the delivery limit (SP-21)."""
        return ARCHIVED

    def stored_by_request(self, before: int, after: int) -> tuple[int, int]:
        """SP-47: the SPSO values a request's state write may carry, SPSO being `before` the write's transitions
        and `after` them: the seed's table writes the new SPSO, and nothing in it forbids the one before."""
        return before, after

    def new_records_bounds(self, partition) -> tuple[int, int]:
        """(first, last) of the never-acquired records that may be acquired now; empty when last < first."""
        # SP-7: the window may not grow past max_inflight_records.
        return partition.speo, min(partition.log_end_offset, partition.spso + partition.max_inflight_records) - 1

    def lowest_offsets(self, partition, offsets: list[int], max_records: int, record_limit: bool) -> list[int]:
        """The offsets of the lowest allowed acquisition, from the lowest `max_records` acquirable `offsets`."""
        return offsets  # SP-5

    def limits_violation(self, partition, max_records: int, records: Sequence[Sequence[int]], total: int,
                       new_runs: list[tuple[int, int]], record_limit: bool,
                       archived: Sequence[Sequence[int]] | None) -> Violation | None:
        """Why an acquisition of `total` records, in runs each allowed (SP-3, SP-4), with `new_runs` the parts
        of them past SPEO, breaks the limits on what one acquisition holds; None if it does not."""
        if total > max_records:  # SP-5
            return Violation("SP-5", f"at most {max_records} records", f"{total} records")
        spso, last = partition.spso, new_runs[-1][1] if new_runs else None
        if last is not None and last + 1 - spso > partition.max_inflight_records:
            # SP-7: the window after an acquisition of new records (a loaded window may be over the limit, SP-26).
            return Violation("SP-7", f"a window of at most {partition.max_inflight_records} records from SPSO {spso}",
                             f"acquiring up to offset {last} (window {last + 1 - spso})")
        return None

    def acknowledgement_answer(self, batches: Sequence[tuple[int, int, str]], actor: str, spso: int, speo: int,
                               not_owned_error: Callable[[str, int, int], Ruled | None], holes: Set[int],
                               straddle_npe: str, renew: bool, renew_enabled: bool,
                               cached_below: bool) -> tuple[Ruled, int]:
        """The one answer to a request of batches (first, last, type) against the window [spso, speo), and how
        many batches came before the one that failed (all of them when none did). `not_owned_error(actor,
        first, last)` judges the records of one batch inside the window."""
        # SP-10: request validation comes before any record is looked at: ascending batches sharing no
        # offset, each accept, release or reject.
        previous_last = -1
        for first, last, ack_type in batches:
            if first > last or first <= previous_last or ack_type in ("gap", "renew"):
                return MALFORMED_REQUEST, 0
            previous_last = last
        # SP-19: the first failing batch decides the one error of the request.
        for index, (first, last, _) in enumerate(batches):
            if last >= speo:  # SP-13
                ruled = PAST_THE_END
            elif first < spso:  # SP-15: records below SPSO are terminal, not acquired
                ruled = NOT_ACQUIRED
            else:
                ruled = not_owned_error(actor, first, last)
            if ruled is not None:
                return ruled, index
        return ACCEPTED, len(batches)


class Kafka42Rules(KipRules):
    """What Apache Kafka 4.2's SharePartition does differently (the clauses marked `profile: kafka-4.2`),
    and why: it fetches and caches whole log batches, treats MaxRecords as a soft limit, looks
    acknowledgements up in that cache, and reads a log with transactions, a moving start and compaction."""

    lock_expired = KAFKA_LOCK_EXPIRED  # SP-17: Kafka does not remember expired locks: the record is not acquired
    record_limit_mode = True  # SP-42: KIP-1206's acquire mode
    in_progress_holds_locks = True  # SP-44: a lock expiring while the state is written finds the records moving
    renews = True  # SP-41: KIP-1222's RENEW, which restarts a lock and is never rolled back
    writes_move_start = True  # SP-66: SPSO moves when a state write completes, not after every step
    acknowledges_beside_fetch = True  # SP-67: a ShareFetch acquires while its acknowledgements are written
    start_clause = "SP-66"
    ranges = ("SP-45", KAFKA_RANGES)  # Kafka 4.2 starts only within its configuration ranges

    def stored_by_request(self, before: int, after: int) -> tuple[int, int]:
        # SP-47: Kafka writes the SPSO it holds before the write, and moves SPSO only once the write is done.
        return before, before

    def new_records_bounds(self, partition) -> tuple[int, int]:
        first, last = partition.speo, partition.log_end_offset - 1
        if partition.speo - partition.spso >= partition.max_inflight_records:  # SP-8: checked before acquiring
            return first, first - 1
        if first < partition.log.start_offset:  # SP-66: a fetch below the log start learns it, acquiring nothing
            return first, first - 1
        if partition.log.read_committed:  # SP-62: read_committed reads below the last stable offset
            last = min(last, partition.log.last_stable_offset(partition.log_end_offset) - 1)
        if partition.has_available_record():  # SP-65: fetched on from inside the window, the new records start at
            return first, last               # SPEO, compacted or not (the client acknowledges those as gaps)
        return partition.log.first_present(first), last  # SP-65: batches compaction removed are skipped

    def lowest_offsets(self, partition, offsets: list[int], max_records: int, record_limit: bool) -> list[int]:
        # SP-6: Kafka completes the log batch holding the last new record; SP-42: not under record_limit.
        speo = partition.speo
        reacquired = [offset for offset in offsets if offset < speo]
        # SP-43: a throttled redelivery comes alone, or ends the acquisition before it.
        threshold = throttle_threshold(partition.delivery_count_limit)
        throttled = [index for index, offset in enumerate(reacquired) if partition.delivery_count_of(offset) >= threshold]
        if throttled:
            return reacquired[:throttled[0]] or reacquired[:1]
        room = min(max_records, partition.max_inflight_records - (speo - partition.spso)) - len(reacquired)
        if room <= 0 or len(offsets) == len(reacquired):
            return reacquired
        # SP-65: past batches compaction removed; SP-62: below the last stable offset.
        new_first, new_last = partition.acquirable_new_records()
        last = min(new_first + room - 1, new_last)
        if not record_limit:
            _, last = partition.log_batch_of(last)
        return reacquired + list(range(new_first, last + 1))

    def limits_violation(self, partition, max_records: int, records: Sequence[Sequence[int]], total: int,
                       new_runs: list[tuple[int, int]], record_limit: bool,
                       archived: Sequence[Sequence[int]] | None) -> Violation | None:
        # SP-6: MaxRecords is a soft limit: new records come in whole log batches (SP-8: none at capacity).
        if record_limit and total > max_records:  # SP-42: a hard limit
            return Violation("SP-42", f"at most {max_records} records (record_limit)", f"{total} records")
        violation = throttle_violation(partition, records, total, bool(new_runs)) if records else None
        if violation is not None:
            return violation
        violation = _archived_violation(partition, records, archived, new_runs)
        if violation is not None:
            return violation
        reacquired = total - sum(last + 1 - first for first, last in new_runs)
        new_runs = sorted(new_runs + archived_runs(partition, records, archived))
        return _new_batches_violation(partition, max_records, reacquired, new_runs, record_limit) if new_runs else None

    def acknowledgement_answer(self, batches: Sequence[tuple[int, int, str]], actor: str, spso: int, speo: int,
                               not_owned_error: Callable[[str, int, int], Ruled | None], holes: Set[int],
                               straddle_npe: str, renew: bool, renew_enabled: bool,
                               cached_below: bool) -> tuple[Ruled, int]:
        """`holes`: offsets of the window not in Kafka's cache (SP-14, SP-65); `cached_below`: Kafka's cache
        holds records below SPSO (SP-66); `renew_enabled`: the group renews (SP-72, kafka-4.4)."""
        # SP-10: Kafka validates only `first < previous last`: batches may share an offset (SP-11), and
        # gap (SP-12) and renew (SP-41) are types too.
        previous_last = -1
        for first, last, ack_type in batches:
            if first > last or first < previous_last:
                return MALFORMED_REQUEST, 0
            if ack_type == "renew" and not renew:  # SP-41: a renewal needs IsRenewAck
                return RENEW_NOT_ANNOUNCED, 0
            previous_last = last
        # SP-19: the first failing batch decides the one error of the request.
        answer = ACCEPTED
        previous_last, previous_type = -1, None
        for index, (first, last, ack_type) in enumerate(batches):
            if last < spso:  # SP-18: wholly below SPSO, ignored
                previous_last, previous_type = last, ack_type
                continue
            # SP-14, SP-40: the cache lookup (without holes, only a batch past SPEO can fail it).
            ruled = _kafka_lookup_error(first, last, spso, speo, holes, straddle_npe, cached_below) \
                if holes or last >= speo else None
            if ruled is None and first == previous_last:
                if first < spso:
                    answer = SHARED_OFFSET_SKIPPED  # SP-11: the shared offset is below SPSO, skipped (SP-18)
                elif previous_type != "renew":  # SP-11: the shared record is in a pending transition
                    ruled = SHARED_OFFSET
                else:  # SP-41: a renewal starts no transition: the shared record is judged as any
                    answer = RENEWAL_SHARES_OFFSET
            if ruled is None:  # SP-18: offsets below SPSO are skipped
                ruled = _kafka_not_owned_error(actor, max(first, spso), last, spso, holes, not_owned_error) if holes \
                    else not_owned_error(actor, max(first, spso), last)
            if ruled is None and ack_type == "renew":  # checked once the records are the actor's
                ruled = self.renewal_refusal(renew_enabled)
            if ruled is not None:
                return ruled, index
            previous_last, previous_type = last, ack_type
        return answer, len(batches)

    def renewal_refusal(self, renew_enabled: bool) -> Ruled | None:
        """The answer to a renewal of records the actor holds, if it is refused."""
        return None  # SP-41: Kafka 4.2 always renews


class Kafka44Rules(Kafka42Rules):
    """What Apache Kafka 4.4's SharePartition does differently from 4.2's (the clauses marked `profile:
    kafka-4.4` alone), and why: a group's share configs are read at each transition and may change while
    it runs (KIP-1240, SP-70), a group may refuse renewals (SP-72), and a group with a dead-letter queue
    (KIP-1191) archives rejected and exhausted records in two phases (SP-73, SP-74)."""

    group_configs = True  # SP-70
    states = STATES + (ARCHIVING,)  # SP-73
    loadable_states = LOADABLE_STATES + (ARCHIVING,)  # SP-26, SP-73: persisted as DeliveryState 3
    ranges = ("SP-71", KAFKA44_RANGES)  # Kafka 4.4's ranges: a group's delivery limit up to 25

    def archive_state(self, partition) -> str:
        # SP-73: with a dead-letter queue the record is archiving until phase 2 sends it there (SP-74).
        return ARCHIVING if partition.dead_letter_queue else ARCHIVED

    def renewal_refusal(self, renew_enabled: bool) -> Ruled | None:
        # SP-72: a group whose share.renew.acknowledge.enable is false refuses the renewal.
        return None if renew_enabled else RENEW_DISABLED


# The profiles, each a layer over the one before (model/profiles.py).
RULES = {KIP: KipRules(), KAFKA_42: Kafka42Rules(), KAFKA_44: Kafka44Rules()}
