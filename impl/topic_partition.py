"""TopicPartition: one partition of a topic, named in traces and share-partition keys as "topic:partition".

    tp = TopicPartition("orders", 0);  str(tp) -> "orders:0"
    TopicPartition.parse("orders:0") -> TopicPartition("orders", 0)
    keyed("g:orders:0") -> ("g", TopicPartition("orders", 0))    # a share-partition or ic key

A topic name never holds a colon (Kafka allows letters, digits, `.`, `_` and
`-`), so the partition is what follows the last one; a group id may hold
colons, so a key is read from the right.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}"  # as traces name partitions

    @classmethod
    def parse(cls, name: str) -> TopicPartition:
        """The partition a trace names "topic:partition"; ValueError if `name` is not such a name."""
        topic, _, partition = name.rpartition(":")
        if not topic:
            raise ValueError(f"{name!r} is not topic:partition")
        return cls(topic, int(partition))


def keyed(key: str) -> tuple[str, TopicPartition]:
    """(group, partition) of a "group:topic:partition" key; ValueError if `key` is not such a key."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[1]:
        raise ValueError(f"{key!r} is not group:topic:partition")
    group, topic, partition = parts
    return group, TopicPartition(topic, int(partition))
