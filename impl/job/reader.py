"""KioReader: a processor's PartitionReader over kipcheck's own consumer (impl/consumer, the wire through kio).

    consumer = Consumer({"bootstrap.servers": servers})          # no group: assigned, never subscribed
    reader = KioReader(consumer, "orders")
    reader.read(partition, offset, max_records)                   # -> [Record(offset, key, value), ...], [] if none yet

The twin of impl/expansion's ConfluentReader: the consumer is assigned the
partitions the processor reads and sought where it asks; buffering, pausing
and moving a partition are impl/expansion/buffered_reader.py's. Nothing is
committed through this consumer.
"""

from __future__ import annotations

from kipcheck.impl.consumer import Consumer, TopicPartition
from kipcheck.impl.expansion.buffered_reader import BUFFER_MAX, BufferedReader
from kipcheck.impl.expansion.processor import Record

POLL_TIMEOUT_MS = 50  # how long a read waits when nothing is buffered


class KioReader(BufferedReader):
    def __init__(self, consumer: Consumer, topic: str, buffer_max: int = BUFFER_MAX,
                 poll_timeout_ms: int = POLL_TIMEOUT_MS) -> None:
        if poll_timeout_ms < 0:
            raise ValueError(f"poll_timeout_ms must be >= 0, found {poll_timeout_ms}")
        super().__init__(buffer_max)
        self.consumer, self.topic, self.poll_timeout_ms = consumer, topic, poll_timeout_ms

    def _move(self, partition: int, offset: int) -> None:
        if partition not in self._next:
            self.consumer.assign([TopicPartition(self.topic, known) for known in (*self._next, partition)])
        self.consumer.resume([TopicPartition(self.topic, partition)])
        self.consumer.seek(TopicPartition(self.topic, partition), offset)

    def _fetch(self) -> list[tuple[int, Record]]:
        return [(record.partition, Record(record.offset, record.key, record.value))
                for record in self.consumer.poll(self.poll_timeout_ms) if record.topic == self.topic]

    def _pause(self, partition: int) -> None:
        self.consumer.pause([TopicPartition(self.topic, partition)])

    def _resume(self, partition: int) -> None:
        self.consumer.resume([TopicPartition(self.topic, partition)])
