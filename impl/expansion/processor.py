"""A processor of a KIP-287 job: state per key, the user's function, output; catch-up and handover (spec/expansion.md).

    def count(key, value, state):                 # the key's state (None at first) -> (new state, output or None)
        state = (state or 0) + 1
        return state, str(state).encode()

    processor = Processor(3, group, reader, count, emit=outputs.append,
                          trace=ExpansionTrace.open(traces, "processor-3", initial=10))
    while running:
        processor.poll()                          # one round; returns the records it read

What a processor reads with (`PartitionReader`) and coordinates with (`Group`)
are protocols, so the consumer underneath can be swapped: impl/expansion's
`ConfluentReader` reads with confluent-kafka's Consumer; a group is the job's
coordination (who holds which partition, committed offsets, the job record).

Each round: learn the job record (expansions) and the assignment; release
the partitions the group takes back (at T1 = the position, EX-11, once the
sources it holds are drained, EX-6); a new processor reads the committed
offsets T1 of its partitions S1 and says ready when almost caught up
(EX-10); then read. A partition is read from offset 0 in offset order
(EX-7), not before its sources are read up to their split offsets (EX-6:
p + N waits, unread, in the log) and, for a partition it holds whose source
another processor holds, not before that source's committed offset covers the
split offset; S1 is read only below T1 while joining. A
record is processed (state and output) from a held partition's output
offset on, rebuilt (state only) when its key is the processor's, else
skipped (EX-7 to EX-9). Then the held partitions' positions are committed.
Every step is written to the processor's trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping, NamedTuple, Protocol, Sequence

from kipcheck.impl.expansion import assignor
from kipcheck.impl.expansion.job import JobRecord, PartitionExpansion
from kipcheck.impl.expansion.tracing import ExpansionTrace
from kipcheck.model.expansion import (
    CATCH_UP_LAG_MAX, PROCESS, REBUILD, SKIP, catch_up_gap, drain_points, key_hash, linear_hash, undrained,
)

MAX_RECORDS = 500  # records read from one partition per round, Kafka's max.poll.records default


class Record(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None


class PartitionReader(Protocol):
    def read(self, partition: int, offset: int, max_records: int) -> Sequence[Record]:
        """Records of the input topic's `partition` from `offset` on, at most `max_records`; [] if none yet."""


class Group(Protocol):
    def job(self) -> JobRecord: ...
    def assignment(self, processor: int) -> Mapping[int, int]:
        """The partitions the processor holds -> the offset its output starts at."""
    def revoking(self, processor: int) -> Collection[int]:
        """Held partitions the group wants back (a new processor is ready for them)."""
    def joining(self, processor: int) -> bool:
        """Whether the processor is new and not yet handed all its partitions."""
    def committed(self, partition: int) -> int: ...
    def commit(self, processor: int, partition: int, offset: int) -> None: ...
    def release(self, processor: int, partition: int, offset: int) -> None: ...
    def ready(self, processor: int) -> None: ...


@dataclass(frozen=True)
class Output:
    key: bytes
    value: Any
    partition: int
    offset: int


class ProcessorError(Exception):
    """The input breaks what a KIP-287 job needs (a record without a key, an offset gap, a record its producer
    routed elsewhere than linear hashing did), or the processor lost its partitions."""


Function = Callable[[bytes, bytes | None, Any], tuple[Any, Any]]


class Processor:
    def __init__(self, index: int, group: Group, reader: PartitionReader, function: Function,
                 emit: Callable[[Output], None], trace: ExpansionTrace | None = None,
                 max_records: int = MAX_RECORDS, catch_up_lag_max: int = CATCH_UP_LAG_MAX) -> None:
        if max_records < 1 or catch_up_lag_max < 0:
            raise ValueError(f"max_records >= 1 and catch_up_lag_max >= 0, found {max_records}, {catch_up_lag_max}")
        self.index, self.group, self.reader, self.function, self.emit = index, group, reader, function, emit
        self.trace, self.max_records, self.catch_up_lag_max = trace, max_records, catch_up_lag_max
        self.state: dict[bytes, Any] = {}
        self.positions: dict[int, int] = {}  # partition -> next offset to read
        self.holding: dict[int, int] = {}  # partition -> offset its output starts at
        self.committed_here: dict[int, int] = {}  # partition -> what this processor last committed
        self.takeover: set[int] = set()  # S1 not yet held, while joining
        self.committed_seen: dict[int, int] = {}  # T1 of S1, as last read
        self.said_ready = False
        self.job = JobRecord(group.job().initial)

    def poll(self) -> int:
        """One round; returns the number of records read."""
        self._learn_job()
        self._learn_assignment()
        self._release_revoked()
        self._observe_committed()
        if self.takeover:
            self._say_ready()
        read = sum(self._read(partition, bound) for partition, bound in self._reading_plan())
        self._commit()
        return read

    def _learn_job(self) -> None:
        job = self.group.job()
        for expansion in job.expansions[len(self.job.expansions):]:
            if isinstance(expansion, PartitionExpansion):
                self._note("expand_partitions", expansion.count, expansion.splits)
            else:
                self._note("expand_processors", expansion.count)
        self.job = job
        if not self.takeover and self.group.joining(self.index):
            # EX-10: S1, the partitions this new processor is to take over (with linear hashing it holds none yet).
            self.takeover = {partition for partition in range(job.partitions)
                             if assignor.target(job, partition) == self.index} - set(self.holding)

    def _learn_assignment(self) -> None:
        for partition, offset in sorted(self.group.assignment(self.index).items()):
            if partition not in self.holding:
                self.holding[partition] = offset
                self.takeover.discard(partition)
                if offset != self.committed_seen.get(partition, 0):  # EX-11: T1, the old holder's last commit
                    self._note("commit", partition, offset)
                self._note("assign", self.index, partition, offset)

    def _release_revoked(self) -> None:
        for partition in sorted(self.group.revoking(self.index)):
            # EX-6: the records of its keys still in sources this processor holds are output first.
            if partition not in self.holding or undrained(partition, self.positions, self.job.splits, self.holding):
                continue
            offset = self.positions.get(partition, 0)  # EX-11: T1, everything below it output
            self.group.release(self.index, partition, offset)
            del self.holding[partition]
            self.committed_here.pop(partition, None)
            self._note("release", self.index, partition, offset)

    def _observe_committed(self) -> None:
        """Read the committed offsets this processor depends on: T1 of its partitions to come (EX-10), and of the
        sources it does not hold of the partitions it holds, until they cover the split offsets (EX-6)."""
        watched = set(self.takeover)
        watched |= {origin for origin, split in self._foreign_sources() if self._unconfirmed(origin, split)}
        for partition in sorted(watched):
            committed = self.group.committed(partition)
            if committed != self.committed_seen.get(partition):
                self.committed_seen[partition] = committed
                self._note("commit", partition, committed)

    def _foreign_sources(self, partitions: Collection[int] | None = None) -> list[tuple[int, int]]:
        """Drain points of held partitions (or of `partitions`) in sources another processor holds."""
        return [(origin, split) for partition in (self.holding if partitions is None else partitions)
                for origin, split in drain_points(partition, self.job.splits) if origin not in self.holding]

    def _unconfirmed(self, origin: int, split: int) -> bool:
        return self.committed_seen.get(origin, 0) < split

    def _say_ready(self) -> None:
        gap = catch_up_gap(self.takeover, self.positions, self.committed_seen, self.job.splits, self.catch_up_lag_max)
        if not self.said_ready and gap is None:
            self.group.ready(self.index)
            self.said_ready = True
            self._note("ready", self.index)

    def _reading_plan(self) -> list[tuple[int, int | None]]:
        """(partition, offset to read below, None: the log end), sources before the partitions they split into."""
        plan: dict[int, int | None] = dict.fromkeys(self.holding)
        plan.update({partition: self.committed_seen.get(partition, 0) for partition in self.takeover})  # EX-10
        for partition in list(plan):
            for origin, offset in drain_points(partition, self.job.splits):
                if origin not in self.holding and origin not in self.takeover:
                    plan[origin] = max(plan.get(origin) or 0, offset)  # a source: read up to the split only
        return sorted(plan.items())

    def _waits(self, partition: int) -> bool:
        """EX-6: p + N waits, unread, in the log until p is read up to the split offset (and p's sources up to
        theirs) and, where it is to be output here, until p's holder has output p up to there."""
        if undrained(partition, self.positions, self.job.splits) is not None:
            return True
        return partition in self.holding and any(self._unconfirmed(origin, split)
                                                 for origin, split in self._foreign_sources([partition]))

    def _read(self, partition: int, bound: int | None) -> int:
        if self._waits(partition):
            return 0
        position = self.positions.get(partition, 0)
        limit = self.max_records if bound is None else min(self.max_records, bound - position)
        if limit <= 0:
            return 0
        records = list(self.reader.read(partition, position, limit))[:limit]
        for record in records:
            if record.offset != position:
                raise ProcessorError(f"partition {partition}: offset {record.offset} where {position} was next; "
                                     f"a KIP-287 input topic has dense offsets (not compacted, not transactional)")
            self._apply(partition, record)
            position += 1
        return len(records)

    def _apply(self, partition: int, record: Record) -> None:
        if record.key is None:
            raise ProcessorError(f"partition {partition} offset {record.offset}: a record without a key has no state")
        hashed = key_hash(record.key)
        home = linear_hash(hashed, self.job.partitions, self.job.initial)
        self._check_routed(partition, record.offset, home)
        use = self._use(partition, record.offset, home)
        if use != SKIP:
            self.state[record.key], output = self.function(record.key, record.value, self.state.get(record.key))
            if use == PROCESS and output is not None:
                self.emit(Output(record.key, output, partition, record.offset))
        self.positions[partition] = record.offset + 1
        self._note("read", use, self.index, partition, record.offset, hashed)

    def _check_routed(self, partition: int, offset: int, home: int) -> None:
        """A record is where linear hashing put its key when it was written (EX-2, EX-5): in `home`, or in an
        ancestor of `home` below the offset where the key moved on. Anything else would be applied out of order."""
        if home == partition:
            return
        split = next((split for origin, split in drain_points(home, self.job.splits) if origin == partition), None)
        if split is None:
            raise ProcessorError(f"partition {partition} offset {offset}: its key belongs to partition {home}, never "
                                 f"to {partition}: the producer does not route by linear hashing over "
                                 f"{self.job.initial} (EX-2)")
        if offset >= split:
            raise ProcessorError(f"partition {partition} offset {offset}: its key moved to partition {home} at offset "
                                 f"{split}: a producer still routed with the old partition count (producers stop "
                                 f"across a partition expansion, EX-5)")

    def _use(self, partition: int, offset: int, home: int) -> str:
        """What a record is to this processor; `home` is the partition its key maps to now."""
        start = self.holding.get(partition)
        if start is not None and offset >= start:
            return PROCESS  # EX-11: a held partition's records from its output offset on
        if assignor.target(self.job, home) == self.index or home in self.holding:
            return REBUILD  # EX-9: its own key (to own, or held until a handover), output elsewhere or earlier
        return SKIP

    def _commit(self) -> None:
        for partition, start in sorted(self.holding.items()):
            position = self.positions.get(partition, 0)
            if position > self.committed_here.get(partition, start):
                self.group.commit(self.index, partition, position)
                self.committed_here[partition] = position
                self._note("commit", partition, position, self.index)

    def _note(self, step: str, *args: Any) -> None:
        """Write a step to the processor's trace, if it has one."""
        if self.trace is not None:
            getattr(self.trace, step)(*args)

    def close(self) -> None:
        if self.trace is not None:
            self.trace.close()
