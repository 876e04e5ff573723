"""IcCoordinator: the group coordinator's individual-commit state, durable, for every group and partition.

The real counterpart of model/ic.py, as a library the broker's OffsetCommit and
OffsetFetch will call (spec/ic.md):

    coordinator = IcCoordinator(data_dir, IcConfig(), fsync=True, trace_dir=None, on_cap_reached=None,
                                offsets=None, storage=None)   # the groups' OffsetStore (logs.py); impl/storage
    answer = coordinator.commit("g", "orders", 0, [(45, 47), (50, 50)], member="m1", now_ms=0)
    answer.error, answer.stable_offset            # OffsetCommitResponse ErrorCode, LastStableOffset
    coordinator.fetch("g", "orders", 0)           # (stable_offset, [(first, last), ...]): CommittedRangeOffsets
    coordinator.individually_committed(("g", "orders", 0))   # True once an IC commit was accepted (IC-19)
    coordinator.plain_commit("g", "orders", 0, 48)           # a plain OffsetCommit of such a partition (IC-19)
    coordinator.compact(); coordinator.close()

Answers, in the order they are decided: INDIVIDUAL_COMMIT_NOT_ALLOWED when
`accept.individual.commit` is false (IC-7); INVALID_REQUEST for an empty list,
a backwards range, or an offset outside [0, 2^63 - 1] (IC-8);
INDIVIDUAL_COMMIT_TOO_OLD when every offset is at or below the stable offset
(IC-5); MAX_INDIVIDUAL_COMMIT_REACHED when the partition would hold more than
`individual.commit.max.ranges` ranges (IC-6), which also calls
`on_cap_reached(CapReached(...))`: the seed's "callout rebalance", for the
group coordinator to act on; NOT_COORDINATOR when the logs could not be
written (IC-13: Kafka 4.2 answers a failed offsets-log append, a
KAFKA_STORAGE_ERROR, so); else NONE. Every answer carries the stable offset.

Durability: a commit is planned in memory, written (logs.py: primary log, then
IC log, each fsynced), and only then applied and answered, so NONE means on
disk; a failed write leaves memory and files as before. The IC log is
compacted when it outgrows `individual.commit.log.segment.bytes` with at least
half of its records dead. With `trace_dir`, every commit and fetch is written
to the partition's ic trace, and a restart appends a `replay` step (tracing.py).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Callable, Iterable

from kipcheck.impl.groups.offsets import OffsetStore
from kipcheck.impl.ic.config import IcConfig
from kipcheck.impl.ic.logs import IcLogs, StorageError
from kipcheck.impl.ic.ranges import Range, RangeSet
from kipcheck.impl.ic.state import PartitionIc, Plan
from kipcheck.impl.ic.tracing import IcTraces
from kipcheck.impl.storage import Storage
from kipcheck.model.errors import Error
from kipcheck.model.ic import OFFSET_MAX, plain_commit

log = logging.getLogger("kipcheck.ic")
Key = tuple[str, str, int]


@dataclass(frozen=True)
class CommitAnswer:
    error: str
    stable_offset: int


@dataclass(frozen=True)
class CapReached:
    """A partition's IC commits are blocked at the cap: the group coordinator may call a rebalance (IC-6)."""

    group: str
    topic: str
    partition: int
    ranges_held: int
    max_ranges: int
    stable_offset: int


class IcCoordinator:
    def __init__(self, data_dir: str | os.PathLike, config: IcConfig | None = None, *, fsync: bool = True,
                 trace_dir: str | os.PathLike | None = None, on_cap_reached: Callable[[CapReached], None] | None = None,
                 range_set: Callable[[], RangeSet] = RangeSet, now_ms: int = 0,
                 offsets: OffsetStore | None = None, storage: Storage | None = None) -> None:
        self.config = config or IcConfig()
        self._range_set = range_set
        self._on_cap_reached = on_cap_reached
        self._logs = IcLogs(data_dir, fsync=fsync, offsets=offsets, storage=storage)
        self._compaction_retry_bytes = 0
        self._states = {key: PartitionIc(stable_offset, ranges)
                        for key, (stable_offset, ranges) in self._logs.replay(range_set).items()}
        self._traces = IcTraces(trace_dir, self.config, storage) if trace_dir is not None else None
        if self._traces is not None:
            for key in self._traces.traced_keys():
                state = self._state(key)
                self._traces.replay(key, now_ms, state.stable_offset, state.ranges)

    def commit(self, group: str, topic: str, partition: int, ranges: Iterable[Iterable[int]],
               member: str = "", now_ms: int = 0) -> CommitAnswer:
        key, request = (group, topic, partition), [tuple(pair) for pair in ranges]
        state = self._state(key)
        if self._traces is not None and _traceable(request) and not self._traces.traced(key) \
                and state.stable_offset >= 0:
            # Plain commits came first: the trace starts from the primary log's state (IC-19).
            self._traces.replay(key, now_ms, state.stable_offset, state.ranges)
        plan = None
        error = self._refusal(request, state)
        if error is None:
            plan = state.plan(request)
            error = Error.MAX_INDIVIDUAL_COMMIT_REACHED if plan.ranges_after > self.config.max_ranges \
                else self._write(key, plan, now_ms)
        if error == Error.NONE:
            state.apply(plan)
            self._states.setdefault(key, state)
            self._maybe_compact()
        if self._traces is not None and _traceable(request):
            appends = _appends(plan) if error == Error.NONE else []
            self._traces.commit(key, now_ms, member, request, error, state.stable_offset, state.ranges, appends)
        if error == Error.MAX_INDIVIDUAL_COMMIT_REACHED and self._on_cap_reached is not None:
            self._on_cap_reached(CapReached(group, topic, partition, len(state.ranges), self.config.max_ranges,
                                            state.stable_offset))
        return CommitAnswer(error, state.stable_offset)

    def individually_committed(self, key: Key) -> bool:
        """IC-19: the partition took an individual commit; its plain commits go through plain_commit."""
        return key in self._states

    def plain_commit(self, group: str, topic: str, partition: int, next_offset: int, member: str = "",
                     now_ms: int = 0) -> CommitAnswer:
        """IC-19: a plain OffsetCommit of `next_offset` on an individually committed partition.

        It is the individual commit of every offset below `next_offset`: the stable offset moves forward
        only, and a rewind below it is INDIVIDUAL_COMMIT_TOO_OLD (IC-5). Committing the current position
        again (auto-commit does it every interval) is answered NONE and changes nothing, as in Kafka."""
        stable_offset = self._state((group, topic, partition)).stable_offset
        ranges = plain_commit(stable_offset, next_offset)
        if ranges is None:
            return CommitAnswer(Error.NONE, stable_offset)
        return self.commit(group, topic, partition, ranges, member, now_ms)

    def fetch(self, group: str, topic: str, partition: int, member: str = "", now_ms: int = 0) -> tuple[int, list[Range]]:
        """IC-9: the stable offset and the held ranges (CommittedRangeOffsets)."""
        key = (group, topic, partition)
        state = self._state(key)
        if self._traces is not None:
            self._traces.fetch(key, now_ms, member, state.stable_offset, state.ranges)
        return state.stable_offset, list(state.ranges)

    def partitions(self) -> list[Key]:
        return sorted(self._states)

    def log_sizes_bytes(self) -> tuple[int, int]:
        """(primary offsets log, IC log) sizes on disk."""
        return self._logs.sizes_bytes()

    def compact(self) -> None:
        """Rewrite both logs with the live state only (IC-12: the live IC keys are the held ranges)."""
        self._logs.rewrite({key: (state.stable_offset, state.ranges) for key, state in self._states.items()})

    def close(self) -> None:
        self._logs.close()
        if self._traces is not None:
            self._traces.close()

    def _state(self, key: Key) -> PartitionIc:
        """The key's state; a new one is kept only once a commit applies (refused requests hold no memory)."""
        state = self._states.get(key)
        return state if state is not None else PartitionIc(self._logs.stable_offset(key), self._range_set())

    def _refusal(self, request: list[tuple], state: PartitionIc) -> str | None:
        if not self.config.accept_individual_commit:
            return Error.INDIVIDUAL_COMMIT_NOT_ALLOWED                               # IC-7
        if not request or any(len(pair) != 2 or not all(type(value) is int for value in pair)
                              or not 0 <= pair[0] <= pair[1] <= OFFSET_MAX for pair in request):
            return Error.INVALID_REQUEST                                             # IC-8
        if all(last <= state.stable_offset for _, last in request):
            return Error.INDIVIDUAL_COMMIT_TOO_OLD                                   # IC-5
        return None

    def _write(self, key: Key, plan: Plan, now_ms: int) -> str:
        if not plan.changes:
            return Error.NONE
        try:
            self._logs.write(key, plan, now_ms)
        except StorageError as error:
            log.warning("individual commit of %s not written: %s", key, error)
            return Error.NOT_COORDINATOR                                             # IC-13
        return Error.NONE

    def _maybe_compact(self) -> None:
        _, ic_bytes = self._logs.sizes_bytes()
        if ic_bytes <= max(self.config.segment_bytes, self._compaction_retry_bytes):
            return
        if self._logs.ic_records < 2 * sum(len(state.ranges) for state in self._states.values()):
            return
        try:
            self.compact()
        except (OSError, StorageError) as error:   # the commit is stored; the longer log stays correct
            # Retried once the log has grown by another segment, not on every commit.
            self._compaction_retry_bytes = ic_bytes + self.config.segment_bytes
            log.warning("compacting the individual-commit logs failed: %s", error)


def _traceable(request: list[tuple]) -> bool:
    """Pairs of ints, as the wire delivers them; a library caller's ill-typed request is answered, not traced."""
    return all(len(pair) == 2 and all(type(value) is int for value in pair) for pair in request)


def _appends(plan: Plan | None) -> list[dict]:
    """The records a commit wrote, as the ic trace reports them (IC-4)."""
    if plan is None:
        return []
    appends: list[dict] = [{"log": "primary", "stable_offset": plan.stable_offset}] if plan.folded else []
    appends += [{"log": "ic", "put": [first, last]} for first, last in plan.puts]
    appends += [{"log": "ic", "tombstone": [first, last]} for first, last in sorted(plan.tombstones)]
    return appends
