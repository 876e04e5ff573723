"""KIP-287: partition and processor expansion by linear hashing (seed 004).

The partitioner and the job both map with linear hashing over the initial
processor count N0, which the job remembers (EX-1). A key's partition is
LH(key_hash, partitions) and a partition's processor is LH(partition,
processors). Clause ids refer to spec/expansion.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from kipcheck.model.violation import Violation


def linear_hash(value: int, buckets: int, initial_buckets: int) -> int:
    """Litwin's linear hashing of a non-negative `value` into `buckets` buckets (EX-2).

    With level L the largest such that initial_buckets * 2**L <= buckets, and
    the split pointer s = buckets - initial_buckets * 2**L, buckets below s
    have already been split and use the next level's modulus.
    """
    assert value >= 0 and buckets >= initial_buckets >= 1
    modulus = initial_buckets
    while modulus * 2 <= buckets:
        modulus *= 2
    bucket = value % modulus
    if bucket < buckets - modulus:
        bucket = value % (modulus * 2)
    return bucket


@dataclass
class Expansion:
    """A stateful job reading a topic, as partitions and processors are added."""

    partitions: int
    processors: int
    initial_processors: int

    @classmethod
    def start(cls, initial_partitions: int, initial_processors: int) -> "Expansion":
        # EX-1: the job starts with as many processors as the topic has partitions
        # and remembers that count as the linear-hashing base.
        if initial_partitions != initial_processors or initial_processors < 1:
            raise Violation(
                "EX-1",
                "initial_partitions == initial_processors >= 1",
                f"initial_partitions={initial_partitions}, initial_processors={initial_processors}",
            )
        return cls(initial_partitions, initial_processors, initial_processors)

    def expand_partitions(self, count: int) -> None:
        # EX-4: partitions only grow; the count is the new total.
        if count < self.partitions:
            raise Violation("EX-4", f"a partition count >= {self.partitions}", f"count={count}")
        self.partitions = count

    def expand_processors(self, count: int) -> None:
        # EX-4: processors only grow. EX-3: never more processors than partitions.
        if count < self.processors:
            raise Violation("EX-4", f"a processor count >= {self.processors}", f"count={count}")
        if count > self.partitions:
            raise Violation("EX-3", f"a processor count <= partitions ({self.partitions})", f"count={count}")
        self.processors = count

    def partition_of(self, key_hash: int) -> int:
        # EX-2: the producer's partitioner is linear hashing over N0.
        return linear_hash(key_hash, self.partitions, self.initial_processors)

    def processor_of(self, partition: int) -> int:
        # EX-2: the job's partition -> processor map is linear hashing over N0.
        return linear_hash(partition, self.processors, self.initial_processors)
