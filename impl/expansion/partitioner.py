"""The KIP-287 partitioner: a key's partition by linear hashing over the job's initial count (spec/expansion.md EX-2).

    partitioner = LinearHashPartitioner(initial_partitions=10)
    partition = partitioner.partition(b"customer-7", partitions=15)
    producer.produce("orders", key=b"customer-7", value=b"...", partition=partition)   # confluent-kafka

The function is the model's (model/expansion.py `key_hash` and `linear_hash`,
Kafka's positive murmur2 of the serialized key, then linear hashing): there
is no second implementation to drift. librdkafka's own partitioners are
plain modulo (`murmur2_random` and friends), which moves keys between
processors when partitions are added; so the producer computes the partition
here and passes it explicitly. `partitions` is the job record's current
count (impl/expansion/job.py), not the topic's: the job's count moves only
with its record, after the topic grew (EX-5).
"""

from __future__ import annotations

from kipcheck.model.expansion import key_hash, linear_hash


class LinearHashPartitioner:
    def __init__(self, initial_partitions: int) -> None:
        if type(initial_partitions) is not int or initial_partitions < 1:
            raise ValueError(f"initial_partitions must be an integer >= 1, found {initial_partitions!r}")
        self.initial_partitions = initial_partitions

    def partition(self, key: bytes | str, partitions: int) -> int:
        """The partition of `key` (bytes, or str encoded as UTF-8 as confluent-kafka does) among `partitions`."""
        if key is None:
            raise ValueError("KIP-287 routes by key: a record without a key has no partition (and no state)")
        if isinstance(key, str):
            key = key.encode()
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(f"a key is bytes or str, found {type(key).__name__}")
        if type(partitions) is not int or partitions < self.initial_partitions:
            raise ValueError(f"partitions must be an integer >= the initial {self.initial_partitions} "
                             f"(partitions only grow), found {partitions!r}")
        return linear_hash(key_hash(bytes(key)), partitions, self.initial_partitions)
