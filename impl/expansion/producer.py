"""JobProducer: a KIP-287 job's producer over confluent-kafka's Producer, routing by linear hashing, paused across a
partition expansion (spec/expansion.md EX-2, EX-5).

    producer = JobProducer(Producer({"bootstrap.servers": servers}), "orders", store.read(), trace)
    producer.produce(b"customer-7", b"1")       # to LinearHashPartitioner's partition for the job's count
    producer.pause()                             # the expansion tool: no more records, every one acknowledged
    producer.resume(new_record)                  # routes with the new count from here on
    producer.close()

Why paused: a partition split's offset is its source's log end when the
topic grows, and from there on every record of a moving key must go to the
new partition. Neither Apache Kafka nor the reference broker refuses a
producer that still routes with the old count (KIP-253's partition count in
ProduceRequest was never adopted), so the job's producers stop across a
partition expansion instead: `pause` returns once every record produced
before it is acknowledged (the log ends are final), and produce calls wait
until `resume` gives the new count. A record routed with a stale count
anyway is refused by the processors that read it (ProcessorError), never
applied out of order.

With a trace (impl/expansion/tracing.py), each acknowledged record is an
`append` step (this producer is then the topic's only writer: the trace
shows the whole log, so the split offsets are judged too) or, with
`route_only`, a `route` step; `resume` writes the expansion first.
Thread-safe: produce from any threads; pause and resume from the tool's.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaException, Producer

from kipcheck.impl.expansion.job import JobRecord, PartitionExpansion
from kipcheck.impl.expansion.partitioner import LinearHashPartitioner
from kipcheck.impl.expansion.tracing import ExpansionTrace
from kipcheck.model.expansion import key_hash

FLUSH_TIMEOUT_S = 60.0


class JobProducer:
    def __init__(self, producer: Producer, topic: str, record: JobRecord, trace: ExpansionTrace | None = None,
                 route_only: bool = False) -> None:
        self.producer, self.topic, self.trace, self.route_only = producer, topic, trace, route_only
        self.partitioner = LinearHashPartitioner(record.initial)
        self.record = record
        self.failures: list[str] = []  # records the broker refused
        self._condition = threading.Condition()
        self._paused = False

    def produce(self, key: bytes, value: bytes) -> int:
        """Sends one record (waiting while paused); returns its partition."""
        with self._condition:
            self._condition.wait_for(lambda: not self._paused)
            partition = self.partitioner.partition(key, self.record.partitions)
            hashed = key_hash(key)
            self.producer.produce(self.topic, key=key, value=value, partition=partition,
                                  on_delivery=lambda error, message: self._delivered(error, message, hashed))
            self.producer.poll(0)  # under the lock: delivery reports are traced in the order they come
        return partition

    def _delivered(self, error, message, hashed: int) -> None:
        if error is not None:
            self.failures.append(f"{message.partition()}: {error}")
        elif self.trace is not None and self.route_only:
            self.trace.route(hashed, message.partition())
        elif self.trace is not None:
            self.trace.append(message.partition(), hashed, message.offset())

    def pause(self) -> None:
        """No record is produced until `resume`, and every record produced so far is acknowledged."""
        with self._condition:
            self._paused = True
            left = self.producer.flush(FLUSH_TIMEOUT_S)
        if left or self.failures:
            raise KafkaException(f"{left} record(s) not acknowledged, refused: {self.failures[:5]}")

    def resume(self, record: JobRecord) -> None:
        """Routes with `record`'s count from here on, once this producer's metadata knows the partitions."""
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while len(self.producer.list_topics(self.topic, timeout=FLUSH_TIMEOUT_S).topics[self.topic].partitions) \
                < record.partitions:
            if time.monotonic() > deadline:
                raise KafkaException(f"{self.topic} has fewer partitions than the job's {record.partitions}")
            time.sleep(0.1)
        with self._condition:
            if self.trace is not None:
                for expansion in record.expansions[len(self.record.expansions):]:
                    if isinstance(expansion, PartitionExpansion):
                        self.trace.expand_partitions(expansion.count, expansion.splits)
                    else:
                        self.trace.expand_processors(expansion.count)
            self.record, self._paused = record, False
            self._condition.notify_all()

    def close(self) -> None:
        """Every record acknowledged; KafkaException if one was not, or was refused."""
        self.pause()
        if self.trace is not None:
            self.trace.close()
