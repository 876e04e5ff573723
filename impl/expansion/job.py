"""The job record (spec/expansion.md EX-5): what a KIP-287 job remembers, N0 and every expansion in order.

    record = JobRecord(initial=10)                           # 10 partitions read by 10 processors
    record = record.with_partitions(15, log_end=topic.end)   # splits: each new partition's source and split offset
    record = record.with_processors(15)
    record.partitions, record.processors, record.splits      # 15, 15, {10: (0, 37), ...}
    data = record.encode(); JobRecord.decode(data)           # JSON; a bad record is a JobRecordError

The rules are the model's: every record is replayed through
model/expansion.py's `Expansion`, so a record that breaks EX-1 to EX-5 (a
shrinking count, EX-4; more processors than partitions, EX-3; a split from
the wrong source) is refused with the clause it breaks. Where the record is kept is in
spec/expansion.md EX-5: the last record of a compacted topic, keyed by the
group, on a broker; here it is a value that any store can hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Callable

import msgspec

from kipcheck.model.expansion import Expansion, source
from kipcheck.model.violation import Violation

EXPANSIONS_MAX = 10_000  # expansions one record may hold: a record read from outside is bounded
COUNT_MAX = 2**31 - 1  # Kafka's partition ids are int32


class JobRecordError(ValueError):
    """A job record the rules refuse, or bytes that are no job record."""


@dataclass(frozen=True)
class PartitionExpansion:
    count: int
    splits: tuple[tuple[int, int, int], ...]  # (new partition, source, split offset)


@dataclass(frozen=True)
class ProcessorExpansion:
    count: int


@dataclass(frozen=True)
class JobRecord:
    initial: int  # N0: the partitions and processors the job started with (EX-1)
    expansions: tuple[PartitionExpansion | ProcessorExpansion, ...] = ()

    def __post_init__(self) -> None:
        if len(self.expansions) > EXPANSIONS_MAX:
            raise JobRecordError(f"a job record holds at most {EXPANSIONS_MAX} expansions, "
                                 f"found {len(self.expansions)}")
        self.model()

    def model(self) -> Expansion:
        """The record replayed through the model (EX-1 to EX-5): the counts and splits it stands for."""
        counts = [self.initial, *(expansion.count for expansion in self.expansions)]
        if max(counts) > COUNT_MAX:
            raise JobRecordError(f"a count is at most {COUNT_MAX}, found {max(counts)}")
        if any(offset < 0 for partition, origin, offset in self.splits_in_order()):
            raise JobRecordError("a split offset is an offset, >= 0")
        try:
            job = Expansion.start(self.initial, self.initial)
            for expansion in self.expansions:
                if isinstance(expansion, PartitionExpansion):
                    job.expand_partitions(expansion.count, list(expansion.splits))
                else:
                    job.expand_processors(expansion.count)
        except Violation as violation:
            raise JobRecordError(f"the job record breaks {violation.clause}: allowed {violation.allowed}, "
                                 f"found {violation.observed}") from None
        return job

    @property
    def partitions(self) -> int:
        return next((e.count for e in reversed(self.expansions) if isinstance(e, PartitionExpansion)), self.initial)

    @property
    def processors(self) -> int:
        return next((e.count for e in reversed(self.expansions) if isinstance(e, ProcessorExpansion)), self.initial)

    @property
    def splits(self) -> dict[int, tuple[int, int]]:
        """Each partition added by an expansion -> (its source, the split offset) (EX-5)."""
        return {partition: (origin, offset) for partition, origin, offset in self.splits_in_order()}

    def splits_in_order(self) -> list[tuple[int, int, int]]:
        return [split for expansion in self.expansions if isinstance(expansion, PartitionExpansion)
                for split in expansion.splits]

    def with_partitions(self, count: int, log_end: Callable[[int], int]) -> "JobRecord":
        """The record after the topic grew to `count` partitions; `log_end(partition)` is a source's log end
        when it grew, the split offset (EX-5)."""
        splits = []
        for partition in range(self.partitions, count):
            origin = source(partition, self.partitions, self.initial)
            splits.append((partition, origin, log_end(origin)))
        return JobRecord(self.initial, (*self.expansions, PartitionExpansion(count, tuple(splits))))

    def with_processors(self, count: int) -> "JobRecord":
        return JobRecord(self.initial, (*self.expansions, ProcessorExpansion(count)))

    def encode(self) -> bytes:
        return msgspec.json.encode({"initial": self.initial, "expansions": [
            {"partitions": e.count, "splits": [list(split) for split in e.splits]} if isinstance(e, PartitionExpansion)
            else {"processors": e.count} for e in self.expansions]})

    @classmethod
    def decode(cls, data: bytes) -> "JobRecord":
        try:
            record = msgspec.json.decode(data, type=_Encoded)
        except msgspec.DecodeError as error:
            raise JobRecordError(f"not a job record: {error}") from None
        expansions = []
        for entry in record.expansions:
            if (entry.partitions is None) == (entry.processors is None):
                raise JobRecordError("each expansion names exactly one of 'partitions' and 'processors'")
            if entry.processors is not None:
                expansions.append(ProcessorExpansion(entry.processors))
            else:
                expansions.append(PartitionExpansion(entry.partitions, tuple(tuple(split) for split in entry.splits)))
        return cls(record.initial, tuple(expansions))


_Count = Annotated[int, msgspec.Meta(ge=1, le=COUNT_MAX)]
_Offset = Annotated[int, msgspec.Meta(ge=0)]


class _EncodedExpansion(msgspec.Struct, forbid_unknown_fields=True):
    partitions: _Count | None = None
    processors: _Count | None = None
    splits: list[tuple[_Offset, _Offset, _Offset]] = []


class _Encoded(msgspec.Struct, forbid_unknown_fields=True):
    initial: _Count
    expansions: Annotated[list[_EncodedExpansion], msgspec.Meta(max_length=EXPANSIONS_MAX)]
