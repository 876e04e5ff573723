"""The job record (spec/expansion.md EX-5): what a KIP-287 job remembers, N0 and every expansion in order.

    record = JobRecord(initial=10)                           # 10 partitions read by 10 processors
    record = record.with_partitions(15, log_end=topic.end)   # splits: each new partition's source and split offset
    record = record.with_processors(15)
    record.partitions, record.processors, record.splits      # 15, 15, {10: (0, 37), ...}
    record.takeover(12)                                      # [12]: S1 of a processor added by an expansion
    data = record.encode(); JobRecord.decode(data)           # JSON; a bad record is a JobRecordError

The rules are the model's: every record is replayed through
model/expansion.py's `Expansion`, so a record that breaks EX-1 to EX-5 (a
shrinking count, EX-4; more processors than partitions, EX-3; a split from
the wrong source) is refused with the clause it breaks. Where the record is
kept is in spec/expansion.md EX-5: the last record of the compacted topic
JOBS_TOPIC, keyed by the job's group, on a broker (impl/expansion/store.py
writes and reads it with confluent-kafka's clients; a broker reads it from its
own log with LatestRecords).

    records = LatestRecords()
    records.read(log.read, log.end_offset).get("counter")    # the group's last record's bytes, or None
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Callable

import msgspec
from kio.records.readers import read_batch

from kipcheck.impl.wire.batches import COMPRESSION_MASK, CONTROL, InvalidBatch, read_header
from kipcheck.model.expansion import Expansion, source, takeover_partitions
from kipcheck.model.violation import Violation

JOBS_TOPIC = "kip287-jobs"  # where jobs keep their records on a broker, one key per job: its group id
READ_BYTES = 1 << 20  # what LatestRecords asks a log for at a time
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

    def takeover(self, processor: int) -> list[int]:
        """S1 of a processor added by a processor expansion: the partitions that mapped to it when it was added
        (EX-10); [] for one the job started with."""
        partitions, count = self.initial, self.initial
        for expansion in self.expansions:
            if isinstance(expansion, PartitionExpansion):
                partitions = expansion.count
            elif count <= processor < expansion.count:
                return takeover_partitions(processor, partitions, expansion.count, self.initial)
            else:
                count = expansion.count
        return []

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


class LatestRecords:
    """Each key's last value in a log of raw v2 batches, read on from where the last call stopped."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.position = 0

    def read(self, read: Callable[[int, int], bytes], end_offset: int) -> dict[str, bytes]:
        """`read(offset, max_bytes)` gives whole batches from the one holding `offset` (a PartitionLog's read);
        JobRecordError for a batch that cannot be read here (compressed, or broken)."""
        while self.position < end_offset:
            data = read(self.position, READ_BYTES)
            if not data:
                break
            position = 0
            while position < len(data):
                position = self._take(data, position)
        return self.values

    def _take(self, data: bytes, position: int) -> int:
        """The batch at `position`: its records taken, the position after it returned."""
        try:
            header = read_header(data, position)
            if header.attributes & COMPRESSION_MASK:
                raise InvalidBatch("a compressed batch: job records are written uncompressed")
            batch = None if header.attributes & CONTROL else read_batch(data, position)[0]
        except (InvalidBatch, ValueError, IndexError) as error:
            raise JobRecordError(f"the jobs topic holds a batch that cannot be read at offset {self.position}: "
                                 f"{error}") from None
        for record in batch.records if batch is not None else ():
            if record.offset >= self.position and record.key is not None and record.value is not None:
                self.values[record.key.decode(errors="replace")] = record.value
        self.position = max(self.position, int.from_bytes(data[position:position + 8], "big") +
                            header.last_offset_delta + 1)
        return position + header.length
