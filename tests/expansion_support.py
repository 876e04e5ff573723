"""Test doubles for impl/expansion: an in-memory topic, the job's group in this process, and a job driver.

Not the real thing: the group coordinator's assignors and a broker's
CreatePartitions come with the broker part of KIP-287, and the end-to-end run
against the reference broker and Apache Kafka after it. These doubles hold
the state a group keeps (the job record, who holds what, committed offsets)
and take every decision from impl/expansion's `assignor`, so the library's
logic is what these tests exercise.

    job = Job(10, tmp_path)                               # topic, group, producer, processors 0..9
    job.run([("partitions", 15), ("processors", 15), ("partitions", 18)])   # while producing
    job.outputs == job.reference()                        # every record's running count, once

A Job's log is an InMemoryTopic unless given another with the same methods
(append, end, grow, reader): tests/test_expansion_confluent.py gives it a
topic on librdkafka's mock cluster, read through confluent-kafka consumers.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from kipcheck.impl.expansion import assignor
from kipcheck.impl.expansion.job import JobRecord
from kipcheck.impl.expansion.partitioner import LinearHashPartitioner
from kipcheck.impl.expansion.processor import Output, Processor, Record
from kipcheck.impl.expansion.tracing import ExpansionTrace
from kipcheck.model.expansion import GROUP, PROCESSORS, key_hash


class InMemoryTopic:
    """Partitions of (key, value) records, offsets dense from 0."""

    def __init__(self, partitions: int) -> None:
        self.records: list[list[tuple[bytes, bytes]]] = [[] for _ in range(partitions)]

    def append(self, partition: int, key: bytes, value: bytes) -> int:
        self.records[partition].append((key, value))
        return len(self.records[partition]) - 1

    def end(self, partition: int) -> int:
        return len(self.records[partition])

    def grow(self, partitions: int) -> None:
        self.records += [[] for _ in range(partitions - len(self.records))]

    def read(self, partition: int, offset: int, max_records: int) -> list[Record]:
        chosen = self.records[partition][offset:offset + max_records]
        return [Record(offset + index, key, value) for index, (key, value) in enumerate(chosen)]

    def reader(self, processor: int) -> InMemoryTopic:
        return self


class LocalGroup:
    """The job's coordination in this process: the job record, holders, committed offsets, handovers."""

    def __init__(self, record: JobRecord, trace: ExpansionTrace | None = None) -> None:
        self.record, self.trace = record, trace
        self.holders: dict[int, int] = {}
        self.output_from: dict[int, int] = {}
        self.committed_offsets: dict[int, int] = {}
        self.members: set[int] = set()
        self.joining_processors: set[int] = set()
        self.ready_processors: set[int] = set()
        self.revoke: dict[int, int] = {}

    def job(self) -> JobRecord:
        return self.record

    def expand(self, record: JobRecord) -> None:
        if record.processors != self.record.processors:
            self.joining_processors |= assignor.gaining_processors(self.record, record)
            if self.trace is not None:
                self.trace.expand_processors(record.processors)
        elif self.trace is not None:
            self.trace.expand_partitions(record.partitions, record.expansions[-1].splits)
        self.record = record
        self._rebalance()

    def join(self, processor: int) -> None:
        self.members.add(processor)
        self._rebalance()

    def handovers_pending(self) -> bool:
        return bool(self.joining_processors)

    def assignment(self, processor: int) -> dict[int, int]:
        return {partition: self.output_from[partition] for partition, holder in self.holders.items()
                if holder == processor}

    def revoking(self, processor: int) -> set[int]:
        return {partition for partition, holder in self.revoke.items() if holder == processor}

    def joining(self, processor: int) -> bool:
        return processor in self.joining_processors

    def committed(self, partition: int) -> int:
        return self.committed_offsets.get(partition, 0)

    def commit(self, processor: int, partition: int, offset: int) -> None:
        assert self.holders.get(partition) == processor, f"processor {processor} commits {partition} it does not hold"
        self.committed_offsets[partition] = offset
        if self.trace is not None:
            self.trace.commit(partition, offset, processor)

    def release(self, processor: int, partition: int, offset: int) -> None:
        assert self.revoke.pop(partition) == processor and self.holders.pop(partition) == processor
        self.committed_offsets[partition] = offset
        if self.trace is not None:
            self.trace.release(processor, partition, offset)
        self._rebalance()

    def ready(self, processor: int) -> None:
        self.ready_processors.add(processor)
        if self.trace is not None:
            self.trace.ready(processor)
        self._rebalance()

    def _rebalance(self) -> None:
        moves = assignor.next_moves(self.record, self.holders, self.committed_offsets, self.members,
                                    self.joining_processors, self.ready_processors)
        self.revoke.update(moves.revoke)
        for partition, (processor, offset) in sorted(moves.assign.items()):
            self.holders[partition], self.output_from[partition] = processor, offset
            if self.trace is not None:
                self.trace.assign(processor, partition, offset)
        for processor in list(self.joining_processors):
            if all(self.holders.get(partition) == processor for partition in range(self.record.partitions)
                   if assignor.target(self.record, partition) == processor):
                self.joining_processors.discard(processor)
                self.ready_processors.discard(processor)


def running_count(key: bytes, value: bytes | None, state: int | None) -> tuple[int, int]:
    """The seed's example job: a running count per key; the output is the count after this record."""
    state = (state or 0) + 1
    return state, state


class Job:
    """A producer, the group and processors over an in-memory topic, driven round by round with a seed."""

    def __init__(self, initial: int, trace_dir: Path, seed: int = 287, keys: int = 40, max_records: int = 7,
                 catch_up_lag_max: int = 5, log=None) -> None:
        self.topic = InMemoryTopic(initial) if log is None else log
        self.trace_dir, self.random = trace_dir, random.Random(seed)
        self.keys = [b"key-%d" % number for number in range(keys)]
        self.max_records, self.catch_up_lag_max = max_records, catch_up_lag_max
        self.partitioner = LinearHashPartitioner(initial)
        self.producer_trace = self._trace("producer", initial)
        self.group = LocalGroup(JobRecord(initial), self._trace("group", initial, GROUP))
        self.processors: list[Processor] = []
        self.outputs: dict[tuple[int, int], int] = {}
        self.emitted = Counter()
        self.written: list[tuple[bytes, int, int]] = []  # (key, partition, offset) in write order
        for _ in range(initial):
            self.add_processor()

    def _trace(self, actor: str, initial: int, view: str = PROCESSORS) -> ExpansionTrace:
        return ExpansionTrace.open(self.trace_dir, actor, initial, self.catch_up_lag_max, view, clock_ms=lambda: 0)

    def add_processor(self) -> Processor:
        index = len(self.processors)
        trace = self._trace(f"processor-{index}", self.group.record.initial)
        processor = Processor(index, self.group, self.topic.reader(index), running_count, self._emit, trace,
                              self.max_records, self.catch_up_lag_max)
        self.processors.append(processor)
        self.group.join(index)
        return processor

    def _emit(self, output: Output) -> None:
        self.outputs[(output.partition, output.offset)] = output.value
        self.emitted[(output.partition, output.offset)] += 1

    def produce(self, count: int) -> None:
        for _ in range(count):
            key = self.random.choice(self.keys)
            partition = self.partitioner.partition(key, self.group.record.partitions)
            offset = self.topic.append(partition, key, b"1")
            self.producer_trace.append(partition, key_hash(key), offset)
            self.written.append((key, partition, offset))

    def round(self, produce: int = 0) -> int:
        """Processors poll in a random order, with `produce` records written between polls; returns records read."""
        read = 0
        for processor in self.random.sample(self.processors, len(self.processors)):
            self.produce(self.random.randint(0, produce))
            read += processor.poll()
        return read

    def run_until_idle(self, rounds_max: int = 2_000) -> None:
        """Rounds without producing until every record is read and no handover is pending."""
        for _ in range(rounds_max):
            read = self.round()
            if read == 0 and len(self.emitted) == len(self.written) and not self.group.handovers_pending():
                return
        raise AssertionError(f"the job did not settle in {rounds_max} rounds")

    def finish_handovers(self, produce: int, rounds_max: int = 2_000) -> None:
        """Rounds, producing, until no handover is pending (EX-12: the next expansion waits for them)."""
        for _ in range(rounds_max):
            if not self.group.handovers_pending() and not self.group.revoke:
                return
            self.round(produce)
        raise AssertionError(f"the handovers did not finish in {rounds_max} rounds")

    def run(self, expansions: list[tuple[str, int]], rounds: int = 25, produce: int = 8) -> None:
        """Produce and process, then each expansion ("partitions" or "processors", count) while producing on, with
        `rounds` rounds after each; processors lag behind (they read `max_records` per partition per round)."""
        for _ in range(rounds):
            self.round(produce)
        for kind, count in expansions:
            self.finish_handovers(produce)
            (self.expand_partitions if kind == "partitions" else self.expand_processors)(count)
            for _ in range(rounds):
                self.round(produce)
        self.run_until_idle()

    def expand_partitions(self, count: int) -> None:
        self.topic.grow(count)
        record = self.group.record.with_partitions(count, self.topic.end)
        self.producer_trace.expand_partitions(count, record.expansions[-1].splits)
        self.group.expand(record)

    def expand_processors(self, count: int) -> None:
        self.producer_trace.expand_processors(count)
        self.group.expand(self.group.record.with_processors(count))
        while len(self.processors) < count:
            self.add_processor()

    def reference(self) -> dict[tuple[int, int], int]:
        """A single-threaded running count over the records in the order they were written."""
        counts, expected = Counter(), {}
        for key, partition, offset in self.written:
            counts[key] += 1
            expected[(partition, offset)] = counts[key]
        return expected

    def close(self) -> list[Path]:
        traces = [self.producer_trace, self.group.trace] + [processor.trace for processor in self.processors]
        for trace in traces:
            trace.close()
        return [trace.path for trace in traces]
