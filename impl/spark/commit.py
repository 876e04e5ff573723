"""Committing what a finished micro-batch read: the RangeCommitter interface and its plain-offset form.

The key-range connector commits, for each topic-partition, the offsets a
finished micro-batch adds as closed ranges `[first, last]` (the `ic`
machine's terms: spec/ic.md). With individual commit in the broker those go
out as OffsetCommit offset ranges; until then PlainOffsetCommitter sends a
plain OffsetCommit of `last + 1`, which says the same thing exactly when the
range starts right after the stable offset, the only ranges the connector
asks for. `committed` reads the stable offset back (OffsetFetch: committed
offset - 1, -1 when the group has none).
"""

from __future__ import annotations

from typing import Protocol

from confluent_kafka import Consumer, KafkaException, TopicPartition

TopicPartitionKey = tuple[str, int]


class RangeCommitter(Protocol):
    def committed(self, partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The stable offset of each partition: it and every offset below it are committed (-1: none)."""

    def commit(self, ranges: dict[TopicPartitionKey, list[tuple[int, int]]]) -> dict[TopicPartitionKey, str]:
        """Commit closed offset ranges per partition; Kafka's error name per partition ("NONE": done)."""

    def close(self) -> None: ...


class PlainOffsetCommitter:
    """RangeCommitter over plain OffsetCommit/OffsetFetch, through a confluent-kafka Consumer that never joins."""

    def __init__(self, kafka_config: dict, timeout_s: float) -> None:
        self.consumer = Consumer({**kafka_config, "enable.auto.commit": False})
        self.timeout_s = timeout_s

    def committed(self, partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        answers = self.consumer.committed([TopicPartition(topic, partition) for topic, partition in partitions],
                                          timeout=self.timeout_s)
        stable = {}
        for answer in answers:
            if answer.error is not None:
                raise KafkaException(answer.error)
            stable[(answer.topic, answer.partition)] = max(answer.offset, 0) - 1  # OFFSET_INVALID: none
        return stable

    def commit(self, ranges: dict[TopicPartitionKey, list[tuple[int, int]]]) -> dict[TopicPartitionKey, str]:
        offsets = []
        for (topic, partition), partition_ranges in ranges.items():
            if len(partition_ranges) != 1:
                raise ValueError(f"a plain offset commit holds one range per partition, not {partition_ranges}")
            offsets.append(TopicPartition(topic, partition, partition_ranges[0][1] + 1))
        try:
            answers = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            return dict.fromkeys(ranges, error.args[0].name())
        return {(answer.topic, answer.partition): "NONE" if answer.error is None else answer.error.name()
                for answer in answers}

    def close(self) -> None:
        self.consumer.close()
