"""KIP-287: partition and processor expansion by linear hashing (seed 004).

The partitioner and the job both map with linear hashing over the initial
processor count N0, which the job remembers (EX-1). A key's partition is
LH(key_hash, partitions) and a partition's processor is LH(partition,
processors) (EX-2). Partitions and processors only grow, partitions first
(EX-3, EX-4), one expansion at a time (EX-12).

The job: each new partition takes its keys from one older partition, its
source, from the split offset on (EX-5); nobody reads it before reading the
source up to there (EX-6). A processor builds its state from the log, every
partition in offset order from 0, every record of its keys applied once
(EX-7). A partition is output by one processor at a time (EX-8) and keys move
only to new processors (EX-9): a new processor rebuilds the state of its
partitions S1 without output, says it is ready when almost caught up (EX-10),
and takes them over at the offset T1 where their owner committed and stopped
(EX-11). Clause ids refer to spec/expansion.md.

Library API (pure, deterministic): the functions below, used by impl/expansion
too, and `Expansion`, whose methods take one trace step each and raise
Violation naming the clause a step breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from kipcheck.model.key_hash import murmur2, to_positive
from kipcheck.model.violation import Violation

PROCESS, REBUILD, SKIP = "process", "rebuild", "skip"
# Whose trace: a processor's (or the whole job's), which shows the reads of the processors it names; or the
# group's, which shows assignments, commits and releases but no reads, so positions are not judged in it.
PROCESSORS, GROUP = "processors", "group"
VIEWS = (PROCESSORS, GROUP)
# EX-10: Kafka's max.poll.records default: what a ready processor still has to read fits one poll.
CATCH_UP_LAG_MAX = 500


def level_modulus(buckets: int, initial_buckets: int) -> int:
    """The largest initial_buckets * 2**L that is <= buckets."""
    modulus = initial_buckets
    while modulus * 2 <= buckets:
        modulus *= 2
    return modulus


def linear_hash(value: int, buckets: int, initial_buckets: int) -> int:
    """Litwin's linear hashing of a non-negative `value` into `buckets` buckets (EX-2).

    With level L the largest such that initial_buckets * 2**L <= buckets, and
    the split pointer s = buckets - initial_buckets * 2**L, buckets below s
    have already been split and use the next level's modulus.
    """
    assert value >= 0 and buckets >= initial_buckets >= 1
    modulus = level_modulus(buckets, initial_buckets)
    bucket = value % modulus
    if bucket < buckets - modulus:
        bucket = value % (modulus * 2)
    return bucket


def key_hash(key: bytes) -> int:
    """EX-2: a key's hash, Kafka's positive murmur2 of the serialized key (what Kafka's partitioner hashes)."""
    return to_positive(murmur2(key))


def parent(bucket: int, initial_buckets: int) -> int:
    """EX-5: the bucket that `bucket` (>= initial_buckets) was split from, when there were `bucket` buckets."""
    assert bucket >= initial_buckets >= 1
    return bucket - level_modulus(bucket, initial_buckets)


def source(partition: int, partitions_before: int, initial_partitions: int) -> int:
    """EX-5: the partition among the first `partitions_before` whose keys a newer `partition` took."""
    while partition >= partitions_before:
        partition = parent(partition, initial_partitions)
    return partition


def drain_points(partition: int, splits: Mapping[int, tuple[int, int]]) -> list[tuple[int, int]]:
    """EX-6: (source, split offset) pairs to read up to before any record of `partition`, nearest first.

    `splits` maps each partition added by an expansion to its source and split offset (EX-5).
    """
    points = []
    while partition in splits:
        partition, offset = splits[partition]
        points.append((partition, offset))
    return points


def undrained(partition: int, positions: Mapping[int, int], splits: Mapping[int, tuple[int, int]],
              sources: Iterable[int] | None = None) -> tuple[int, int] | None:
    """EX-6: the first drain point of `partition` (among `sources`, if given) not yet read up to, or None."""
    for point, offset in drain_points(partition, splits):
        if (sources is None or point in sources) and positions.get(point, 0) < offset:
            return point, offset
    return None


def takeover_partitions(processor: int, partitions: int, processors: int, initial_processors: int) -> list[int]:
    """EX-10: S1, the partitions that map to `processor` when `processors` processors read `partitions` partitions."""
    return [partition for partition in range(partitions)
            if linear_hash(partition, processors, initial_processors) == processor]


def catch_up_gap(takeover: Iterable[int], positions: Mapping[int, int], committed: Mapping[int, int],
                 splits: Mapping[int, tuple[int, int]], lag_max: int) -> str | None:
    """EX-10: why a new processor is not yet almost caught up on its partitions S1, or None when it is.

    Almost caught up: every drain point of S1 read, and each partition's T2 (the position) within
    `lag_max` records of its T1 (the group's committed offset).
    """
    for partition in sorted(takeover):
        point = undrained(partition, positions, splits)
        if point is not None:
            return f"partition {partition}'s source {point[0]} read up to {positions.get(point[0], 0)} of {point[1]}"
        lag = committed.get(partition, 0) - positions.get(partition, 0)
        if lag > lag_max:
            return f"partition {partition} is {lag} records behind its committed offset (at most {lag_max})"
    return None


@dataclass
class Expansion:
    """A stateful job reading a topic, as partitions and processors are added."""

    partitions: int
    processors: int
    initial_processors: int
    catch_up_lag_max: int = CATCH_UP_LAG_MAX
    view: str = PROCESSORS
    splits: dict[int, tuple[int, int]] = field(default_factory=dict)  # new partition -> (source, split offset)
    log: dict[int, list[int]] | None = None  # key hashes per partition, once the trace shows appends
    holder: dict[int, int | None] = field(default_factory=dict)  # partition -> processor; None released; absent unknown
    output_from: dict[int, dict[int, int]] = field(default_factory=dict)  # processor -> partition -> assigned offset
    positions: dict[int, dict[int, int]] = field(default_factory=dict)  # processor -> partition -> next offset read
    committed: dict[int, int] = field(default_factory=dict)  # partition -> the group's committed offset (T1)
    released_by: dict[int, int] = field(default_factory=dict)  # released partition -> the processor that released it
    joining: dict[int, set[int]] = field(default_factory=dict)  # new processor -> partitions of S1 not yet assigned
    ready_processors: set[int] = field(default_factory=set)  # joining processors that said they are ready

    @classmethod
    def start(cls, initial_partitions: int, initial_processors: int, catch_up_lag_max: int = CATCH_UP_LAG_MAX,
              view: str = PROCESSORS) -> "Expansion":
        # EX-1: the job starts with as many processors as the topic has partitions
        # and remembers that count as the linear-hashing base.
        if initial_partitions != initial_processors or initial_processors < 1:
            raise Violation(
                "EX-1",
                "initial_partitions == initial_processors >= 1",
                f"initial_partitions={initial_partitions}, initial_processors={initial_processors}",
            )
        return cls(initial_partitions, initial_processors, initial_processors, catch_up_lag_max, view)

    def partition_of(self, key_hash: int) -> int:
        # EX-2: the producer's partitioner is linear hashing over N0.
        return linear_hash(key_hash, self.partitions, self.initial_processors)

    def processor_of(self, partition: int) -> int:
        # EX-2: the job's partition -> processor map is linear hashing over N0.
        return linear_hash(partition, self.processors, self.initial_processors)

    # Expansions.

    def expand_partitions(self, count: int, splits: list[tuple[int, int, int]] | None = None) -> None:
        """Grow the topic to `count` partitions; `splits` as observed [(partition, source, offset)], or None."""
        # EX-4: partitions only grow; the count is the new total.
        if count < self.partitions:
            raise Violation("EX-4", f"a partition count >= {self.partitions}", f"count={count}")
        self._one_expansion_at_a_time()
        # EX-5: each new partition's keys come from its source, from the source's log end on.
        expected = []
        for partition in range(self.partitions, count):
            origin = source(partition, self.partitions, self.initial_processors)
            expected.append((partition, origin, self._log_end(origin)))
        if splits is not None:
            self._check_splits(expected, splits)
        for partition, origin, offset in expected if splits is None else splits:
            self.splits[partition] = (origin, offset)
        self.partitions = count

    def _log_end(self, partition: int) -> int:
        return len(self.log.get(partition, ())) if self.log is not None else 0

    def _check_splits(self, expected: list[tuple[int, int, int]], splits: list[tuple[int, int, int]]) -> None:
        # EX-5: the sources are linear hashing's; the split offsets, where the trace shows the log, its ends.
        shown = sorted(splits)
        if [split[:2] for split in shown] != [split[:2] for split in expected]:
            raise Violation("EX-5", f"(partition, source) {[list(split[:2]) for split in expected]}",
                            f"{[list(split[:2]) for split in shown]}")
        if self.log is not None and shown != expected:
            raise Violation("EX-5", f"split offsets at the sources' log ends {[list(split) for split in expected]}",
                            f"{[list(split) for split in shown]}")

    def expand_processors(self, count: int) -> None:
        # EX-4: processors only grow. EX-3: never more processors than partitions.
        if count < self.processors:
            raise Violation("EX-4", f"a processor count >= {self.processors}", f"count={count}")
        if count > self.partitions:
            raise Violation("EX-3", f"a processor count <= partitions ({self.partitions})", f"count={count}")
        self._one_expansion_at_a_time()
        # EX-10: each new processor joins, to be handed its partitions S1 once it has caught up.
        for processor in range(self.processors, count):
            takeover = takeover_partitions(processor, self.partitions, count, self.initial_processors)
            self.joining[processor] = set(takeover)
        self.processors = count

    def _one_expansion_at_a_time(self) -> None:
        # EX-12: no expansion while a joining processor's partition is still held by its old owner.
        for processor, partitions in sorted(self.joining.items()):
            held = sorted(partition for partition in partitions if self.holder.get(partition) is not None)
            if held:
                raise Violation("EX-12", "no expansion while a processor expansion hands partitions over",
                                f"processor {processor} not yet handed partition(s) {held}")

    # The producer.

    def append(self, partition: int, key_hash: int) -> int:
        """A record written to the topic; returns its offset."""
        # EX-2: the producer routes with the current partition count.
        expected = self.partition_of(key_hash)
        if partition != expected:
            raise Violation("EX-2", f"key hash {key_hash} to partition {expected}", f"partition {partition}")
        # EX-7: offsets are dense, one per record from 0.
        records = (self.log if self.log is not None else self._start_log()).setdefault(partition, [])
        records.append(key_hash)
        return len(records) - 1

    def _start_log(self) -> dict[int, list[int]]:
        self.log = {}
        return self.log

    # The group: assignments, commits, releases.

    def assign(self, processor: int, partition: int, offset: int) -> None:
        self._check_partition("EX-2", partition)
        holder = self.holder.get(partition)
        # EX-8: one holder at a time.
        if holder is not None:
            raise Violation("EX-8", f"partition {partition} assigned once processor {holder} released it",
                            f"assigned to processor {processor} while processor {holder} holds it")
        released = partition in self.holder
        joining = partition in self.joining.get(processor, ())
        # EX-9: a released partition changes processor only to a new one.
        if released and not joining and self.released_by[partition] != processor:
            raise Violation("EX-9", f"partition {partition}, released by processor {self.released_by[partition]}, "
                                    f"assigned to it again or to a joining processor",
                            f"assigned to existing processor {processor}")
        # EX-2: the assignor maps by linear hashing over N0.
        expected = self.processor_of(partition)
        if processor != expected:
            raise Violation("EX-2", f"partition {partition} to processor {expected}", f"to processor {processor}")
        # EX-10: S1 is handed over only once the new processor said it is ready.
        if joining and processor not in self.ready_processors:
            raise Violation("EX-10", f"partition {partition} assigned after processor {processor} is ready",
                            f"assigned to processor {processor}, not ready")
        self._check_assigned_offset(processor, partition, offset)
        self.holder[partition] = processor
        self.output_from.setdefault(processor, {})[partition] = offset
        if joining:
            self.joining[processor].discard(partition)
            if not self.joining[processor]:
                del self.joining[processor]
                self.ready_processors.discard(processor)

    def _check_assigned_offset(self, processor: int, partition: int, offset: int) -> None:
        # EX-11: output goes on exactly where the last holder stopped: the committed offset (0 at the job's start).
        committed = self.committed.get(partition, 0)
        if offset != committed:
            raise Violation("EX-11", f"partition {partition} assigned at its committed offset {committed}",
                            f"offset {offset}")
        # EX-11: the new holder has applied nothing at or past its output offset without output.
        position = self.positions.get(processor, {}).get(partition, 0)
        if position > offset:
            raise Violation("EX-11", f"partition {partition} assigned at >= processor {processor}'s position "
                                     f"{position}", f"offset {offset}: {partition}:{offset}..{position - 1} "
                                     f"applied without output")

    def release(self, processor: int, partition: int, offset: int) -> None:
        self._check_holder("release", processor, partition)
        if self.view == PROCESSORS:  # the trace shows the holder's reads: judge where it stopped
            positions = self.positions.get(processor, {})
            position = positions.get(partition, 0)
            # EX-11: T1 is the holder's position: every record below it output, none above.
            if offset != position:
                raise Violation("EX-11", f"partition {partition} released at processor {processor}'s position "
                                         f"{position}", f"offset {offset}")
            # EX-6: the records of its keys still in sources it holds are output before it gives them up.
            point = undrained(partition, positions, self.splits, self._held_by(processor))
            if point is not None:
                raise Violation("EX-6", f"partition {partition} released after source {point[0]} is read up to "
                                        f"{point[1]}", f"released with source {point[0]} read up to "
                                        f"{positions.get(point[0], 0)}")
        self.holder[partition] = None
        self.released_by[partition] = processor
        self.committed[partition] = offset
        self.output_from.get(processor, {}).pop(partition, None)

    def commit(self, partition: int, offset: int, processor: int | None = None) -> None:
        """The group's committed offset is now `offset`: committed by `processor`, or read by a processor (None)."""
        if processor is not None:
            self._check_holder("commit", processor, partition)
            position = self.positions.get(processor, {}).get(partition, 0)
            # EX-11: a processor commits only what it has read (and so output), where the trace shows its reads.
            if self.view == PROCESSORS and offset > position:
                raise Violation("EX-11", f"a commit of partition {partition} at <= processor {processor}'s "
                                         f"position {position}", f"offset {offset}")
        self.committed[partition] = offset

    def _check_holder(self, action: str, processor: int, partition: int) -> None:
        # EX-8: only the holder commits or releases; a partition the trace never assigned is taken as given.
        holder = self.holder.get(partition, processor)
        if holder != processor:
            raise Violation("EX-8", f"a {action} of partition {partition} by its holder, "
                                    f"{self._holder_name(partition)}", f"a {action} by processor {processor}")

    def ready(self, processor: int) -> None:
        """The new processor asks for its partitions."""
        # EX-10: only a joining processor, and only when almost caught up.
        if processor not in self.joining:
            raise Violation("EX-10", "ready from a joining processor", f"ready from processor {processor}")
        if self.view == GROUP:
            gap = None  # the group's view shows no reads: how far the processor got is not judged there
        else:
            gap = catch_up_gap(self.joining[processor], self.positions.get(processor, {}), self.committed,
                               self.splits, self.catch_up_lag_max)
        if gap is not None:
            raise Violation("EX-10", "ready when almost caught up", f"processor {processor}: {gap}")
        self.ready_processors.add(processor)

    # Processors reading records.

    def read(self, processor: int, partition: int, offset: int, key_hash: int, use: str) -> None:
        """The processor read one record and `use`d it: process, rebuild or skip."""
        positions = self.positions.get(processor, {})
        self._check_record(processor, partition, offset, key_hash, positions.get(partition, 0))
        # EX-6: nothing of a new partition before its sources are drained.
        point = undrained(partition, positions, self.splits)
        if point is not None:
            raise Violation("EX-6", f"partition {partition} read after source {point[0]} is read up to {point[1]}",
                            f"processor {processor} read offset {offset} with source {point[0]} at "
                            f"{positions.get(point[0], 0)}")
        home = self.partition_of(key_hash)
        {PROCESS: self._check_process, REBUILD: self._check_rebuild, SKIP: self._check_skip}[use](
            processor, partition, offset, home)
        self.positions.setdefault(processor, {})[partition] = offset + 1

    def _check_record(self, processor: int, partition: int, offset: int, key_hash: int, position: int) -> None:
        # EX-7: each partition read in offset order from 0, each record once, only records the log has.
        self._check_partition("EX-7", partition)
        if offset != position:
            raise Violation("EX-7", f"processor {processor} reads partition {partition} at offset {position}",
                            f"offset {offset}")
        if self.log is not None:
            records = self.log.get(partition, [])
            if offset >= len(records) or records[offset] != key_hash:
                written = f"key hash {records[offset]}" if offset < len(records) else "no record"
                raise Violation("EX-7", f"the record written at {partition}:{offset}, {written}",
                                f"key hash {key_hash}")

    def _check_process(self, processor: int, partition: int, offset: int, home: int) -> None:
        # EX-10: a joining processor outputs nothing of S1 before it is handed over.
        if partition in self.joining.get(processor, ()):
            raise Violation("EX-10", f"no output of partition {partition} before it is handed to processor {processor}",
                            f"output of {partition}:{offset} while it is held by {self._holder_name(partition)}")
        # EX-8: output only from a partition the processor holds.
        if self.holder.get(partition) != processor:
            raise Violation("EX-8", f"output of partition {partition} by its holder "
                                    f"({self._holder_name(partition)})", f"output by processor {processor}")
        # EX-8: and only of a key whose partition no other processor holds.
        if home in self.holder and self.holder[home] != processor:
            raise Violation("EX-8", f"output of keys of partition {home} by its holder "
                                    f"({self._holder_name(home)})", f"output by processor {processor}")
        # EX-11: from the assigned offset on; the records below were output by the previous holder.
        start = self.output_from[processor][partition]
        if offset < start:
            raise Violation("EX-11", f"output of partition {partition} from offset {start}",
                            f"output of offset {offset}")
        # EX-6: the records of its keys in its sources, below the split offsets, were output before.
        for origin, split in drain_points(partition, self.splits):
            output = self.output_end(processor, origin)
            if output < split:
                raise Violation("EX-6", f"output of partition {partition} after source {origin} is output up to "
                                        f"{split}", f"source {origin} output up to {output}")

    def output_end(self, processor: int, partition: int) -> int:
        """EX-6: the offset below which `processor` knows every record of `partition` was output: the committed
        offset, or its own position where it holds the partition (it outputs what it reads there)."""
        committed = self.committed.get(partition, 0)
        if self.holder.get(partition) == processor:
            return max(committed, self.positions.get(processor, {}).get(partition, 0))
        return committed

    def _keys_of(self, processor: int, home: int) -> bool:
        """EX-7, EX-9: whether keys whose partition is `home` are the processor's: it is to own them, or it holds
        their partition and outputs them until it gives it up."""
        return self.processor_of(home) == processor or self.holder.get(home) == processor

    def _check_rebuild(self, processor: int, partition: int, offset: int, home: int) -> None:
        # EX-9: state is built only for the processor's own keys.
        if not self._keys_of(processor, home):
            raise Violation("EX-9", f"state of keys of partition {home} built by processor {self.processor_of(home)}",
                            f"rebuilt by processor {processor}")
        # EX-10: a joining processor reads its partitions to come only below what their holder committed (T1).
        if partition in self.joining.get(processor, ()) and offset >= self.committed.get(partition, 0):
            raise Violation("EX-10", f"partition {partition} rebuilt below its committed offset "
                                     f"{self.committed.get(partition, 0)}", f"offset {offset}")
        # EX-11: the holder outputs every record from its assigned offset on.
        start = self.output_from.get(processor, {}).get(partition)
        if start is not None and offset >= start:
            raise Violation("EX-11", f"output of partition {partition} from offset {start}",
                            f"offset {offset} rebuilt without output")

    def _check_skip(self, processor: int, partition: int, offset: int, home: int) -> None:
        # EX-7: only records that are none of the processor's keys are passed over.
        start = self.output_from.get(processor, {}).get(partition)
        if self._keys_of(processor, home) or (start is not None and offset >= start):
            raise Violation("EX-7", f"processor {processor} applies {partition}:{offset} (its key)", "skipped")

    # Helpers.

    def _held_by(self, processor: int) -> set[int]:
        return {partition for partition, holder in self.holder.items() if holder == processor}

    def _holder_name(self, partition: int) -> str:
        if partition not in self.holder:
            return "nobody (not assigned)"
        holder = self.holder[partition]
        return "nobody (released)" if holder is None else f"processor {holder}"

    def _check_partition(self, clause: str, partition: int) -> None:
        if not 0 <= partition < self.partitions:
            raise Violation(clause, f"a partition of 0..{self.partitions - 1}", f"partition {partition}")
