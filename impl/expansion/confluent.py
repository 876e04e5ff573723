"""ConfluentReader: a processor's PartitionReader over confluent-kafka's Consumer (impl/expansion/processor.py).

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "job-reader-3", "enable.auto.commit": False})
    reader = ConfluentReader(consumer, "orders")
    reader.read(partition, offset, max_records)     # -> [Record(offset, key, value), ...], [] when none arrived

The consumer is used with explicit assignments, never subscribed: its group
id is only a name, nothing is committed through it. Buffering, pausing and
moving a partition are impl/expansion/buffered_reader.py's.
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kipcheck.impl.expansion.buffered_reader import BUFFER_MAX, BufferedReader
from kipcheck.impl.expansion.processor import ProcessorError, Record

CONSUME_TIMEOUT_S = 0.05  # how long a read waits when nothing is buffered


class ConfluentReader(BufferedReader):
    def __init__(self, consumer: Consumer, topic: str, buffer_max: int = BUFFER_MAX,
                 consume_timeout_s: float = CONSUME_TIMEOUT_S) -> None:
        if consume_timeout_s < 0:
            raise ValueError(f"consume_timeout_s must be >= 0, found {consume_timeout_s}")
        super().__init__(buffer_max)
        self.consumer, self.topic, self.consume_timeout_s = consumer, topic, consume_timeout_s

    def _move(self, partition: int, offset: int) -> None:
        if partition in self._next:
            self.consumer.incremental_unassign([TopicPartition(self.topic, partition)])
        self.consumer.incremental_assign([TopicPartition(self.topic, partition, offset)])

    def _fetch(self) -> list[tuple[int, Record]]:
        fetched = []
        for message in self.consumer.consume(self.buffer_max, self.consume_timeout_s):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise ProcessorError(f"reading {self.topic}: {error.str()}") from KafkaException(error)
            if message.topic() == self.topic:
                fetched.append((message.partition(), Record(message.offset(), message.key(), message.value())))
        return fetched

    def _pause(self, partition: int) -> None:
        self.consumer.pause([TopicPartition(self.topic, partition)])

    def _resume(self, partition: int) -> None:
        self.consumer.resume([TopicPartition(self.topic, partition)])
