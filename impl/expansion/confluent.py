"""ConfluentReader: a processor's PartitionReader over confluent-kafka's Consumer (impl/expansion/processor.py).

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "job-reader-3", "enable.auto.commit": False})
    reader = ConfluentReader(consumer, "orders")
    reader.read(partition, offset, max_records)     # -> [Record(offset, key, value), ...], [] when none arrived

The processor decides what to read, from where (it starts every partition at
offset 0 and reads in offset order, spec/expansion.md EX-7), so the consumer
is used with explicit assignments, never subscribed: its group id is only a
name, nothing is committed through it. Partitions are assigned at the
offset first asked for and repositioned when asked for another; what one
`consume` returns is kept per partition, and a partition holding
`buffer_max` records is paused until the processor reads them, so the
memory held is bounded.
"""

from __future__ import annotations

from collections import deque

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kipcheck.impl.expansion.processor import ProcessorError, Record

BUFFER_MAX = 2_000  # records held per partition before it is paused
CONSUME_TIMEOUT_S = 0.05  # how long a read waits when nothing is buffered


class ConfluentReader:
    def __init__(self, consumer: Consumer, topic: str, buffer_max: int = BUFFER_MAX,
                 consume_timeout_s: float = CONSUME_TIMEOUT_S) -> None:
        if buffer_max < 1 or consume_timeout_s < 0:
            raise ValueError(f"buffer_max >= 1 and consume_timeout_s >= 0, found {buffer_max}, {consume_timeout_s}")
        self.consumer, self.topic = consumer, topic
        self.buffer_max, self.consume_timeout_s = buffer_max, consume_timeout_s
        self._buffers: dict[int, deque[Record]] = {}
        self._next: dict[int, int] = {}  # partition -> the offset the consumer returns next for it
        self._paused: set[int] = set()

    def read(self, partition: int, offset: int, max_records: int) -> list[Record]:
        buffer = self._buffers.get(partition)
        expected = buffer[0].offset if buffer else self._next.get(partition)
        if expected != offset:
            self._position(partition, offset)
        if not self._buffers[partition]:
            self._fill()
        buffer = self._buffers[partition]
        records = [buffer.popleft() for _ in range(min(max_records, len(buffer)))]
        if partition in self._paused and len(buffer) < self.buffer_max:
            self.consumer.resume([TopicPartition(self.topic, partition)])
            self._paused.discard(partition)
        return records

    def _position(self, partition: int, offset: int) -> None:
        """Assign the partition at `offset`, or move it there (its buffered records are dropped)."""
        if partition in self._next:
            self.consumer.incremental_unassign([TopicPartition(self.topic, partition)])
            self._paused.discard(partition)
        self.consumer.incremental_assign([TopicPartition(self.topic, partition, offset)])
        self._buffers[partition] = deque()
        self._next[partition] = offset

    def _fill(self) -> None:
        for message in self.consumer.consume(self.buffer_max, self.consume_timeout_s):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise ProcessorError(f"reading {self.topic}: {error.str()}") from KafkaException(error)
            partition, offset = message.partition(), message.offset()
            if message.topic() != self.topic or partition not in self._next or offset < self._next[partition]:
                continue  # fetched before the partition was moved back (a gap above is the processor's to refuse)
            self._buffers[partition].append(Record(offset, message.key(), message.value()))
            self._next[partition] = offset + 1
            if len(self._buffers[partition]) >= self.buffer_max and partition not in self._paused:
                self.consumer.pause([TopicPartition(self.topic, partition)])
                self._paused.add(partition)
