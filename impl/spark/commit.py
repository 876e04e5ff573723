"""Committing what a finished micro-batch read, as individual commits (spec/ic.md IC-21).

    committer = RangeCommitter({"bootstrap.servers": servers, "group.id": "billing"}, timeout_s=30)
    committer.committed([("orders", 0)])                 # {("orders", 0): stable offset, -1 when none}
    committer.commit({("orders", 0): [(40, 49)]})        # {("orders", 0): "NONE" | Kafka's error name}

The key-range connector commits, for each topic-partition, the offsets a
finished micro-batch adds as closed ranges `[first, last]` (the `ic`
machine's terms). They go out through kipcheck's own consumer
(impl/consumer, over kio): `commit_ranges`, an OffsetCommit carrying
OffsetRanges, which the broker's individual-commit coordinator merges into
the group's stable offset (IC-3). `committed` reads the stable offset back
with OffsetFetch (the committed offset - 1, IC-19). The consumer never joins
the group: it commits as a standalone member, as Spark's driver does.
"""

from __future__ import annotations

from kipcheck.impl.consumer import Consumer, KafkaError, TopicPartition

TopicPartitionKey = tuple[str, int]


class RangeCommitter:
    def __init__(self, kafka_config: dict, timeout_s: float) -> None:
        self.consumer = Consumer({"bootstrap.servers": kafka_config["bootstrap.servers"],
                                  "group.id": kafka_config["group.id"],
                                  "default.api.timeout.ms": int(timeout_s * 1000)})

    def committed(self, partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The stable offset of each partition: it and every offset below it are committed (-1: none).

        Raises KafkaError when the group's offsets cannot be read."""
        answers = self.consumer.committed([TopicPartition(topic, partition) for topic, partition in partitions])
        return {(tp.topic, tp.partition): max(offset, 0) - 1 for tp, offset in answers.items()}

    def commit(self, ranges: dict[TopicPartitionKey, list[tuple[int, int]]]) -> dict[TopicPartitionKey, str]:
        """Commit closed offset ranges per partition; Kafka's error name per partition ("NONE": done).

        One request per partition, so that each partition's answer is its own (a failed request raises)."""
        answers = {}
        for (topic, partition), pairs in ranges.items():
            try:
                answered = self.consumer.commit_ranges({TopicPartition(topic, partition): pairs})
            except KafkaError as error:
                answered = {TopicPartition(topic, partition): error.error}
            answers.update({(tp.topic, tp.partition): error for tp, error in answered.items()})
        return answers

    def close(self) -> None:
        self.consumer.close()
