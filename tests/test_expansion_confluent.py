"""impl/expansion with real clients: confluent-kafka's Producer (the partition computed by LinearHashPartitioner and
passed explicitly) and, under each processor, a confluent-kafka Consumer through ConfluentReader, against
librdkafka's mock cluster in this process. The job's output must equal a single-threaded running count and every
trace must pass `kipcheck check`.

The mock cluster has no CreateTopics or CreatePartitions (both time out): its topics are created with 4 partitions
when first named, and the job starts on 2 of them (N0 = 2) and grows to 3 and 4 by its job record, the count the
producer routes with; the partitions past the job's count stay empty until then. CreatePartitions itself, the
group coordinator's side, the reference broker and Apache Kafka are the end-to-end part of KIP-287, not here.
"""

from __future__ import annotations

import confluent_kafka
from expansion_support import Job

from kipcheck.impl.expansion.confluent import ConfluentReader
from kipcheck.oracle.check import check_file

TOPIC = "orders"
MOCK_PARTITIONS = 4  # what librdkafka's mock cluster gives a topic it creates


class MockClusterTopic:
    """The job's log on librdkafka's mock cluster: appends through a Producer, reads through one Consumer each."""

    def __init__(self, initial: int) -> None:
        self.cluster = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 0})
        broker = next(iter(self.cluster.list_topics(timeout=30).brokers.values()))
        self.servers = f"{broker.host}:{broker.port}"
        self.producer = confluent_kafka.Producer({"bootstrap.servers": self.servers, "linger.ms": 0, "log_level": 0})
        partitions = self.producer.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
        assert len(partitions) == MOCK_PARTITIONS
        self.partitions, self.ends, self.consumers = initial, {}, []

    def append(self, partition: int, key: bytes, value: bytes) -> int:
        assert partition < self.partitions, "the producer routes with the job's count"
        delivered = []
        self.producer.produce(TOPIC, key=key, value=value, partition=partition,
                              on_delivery=lambda error, message: delivered.append((error, message)))
        self.producer.flush(30)
        (error, message), = delivered
        assert error is None, error
        self.ends[partition] = message.offset() + 1
        return message.offset()

    def end(self, partition: int) -> int:
        return self.ends.get(partition, 0)

    def grow(self, partitions: int) -> None:
        assert partitions <= MOCK_PARTITIONS
        self.partitions = partitions

    def reader(self, processor: int) -> ConfluentReader:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": self.servers, "group.id": f"reader-{processor}",
                                             "enable.auto.commit": False, "log_level": 0})
        self.consumers.append(consumer)
        return ConfluentReader(consumer, TOPIC, consume_timeout_s=0.01)

    def close(self) -> None:
        for consumer in self.consumers:
            consumer.close()


def test_a_job_on_confluent_clients_outputs_the_reference_through_its_expansions(tmp_path):
    topic = MockClusterTopic(2)
    try:
        job = Job(2, tmp_path, keys=30, max_records=5, catch_up_lag_max=3, log=topic)
        job.run([("partitions", 3), ("processors", 3), ("partitions", 4)], rounds=6, produce=3)
    finally:
        topic.close()
    paths = job.close()
    assert len(job.written) > 40 and all(topic.end(partition) > 0 for partition in range(4))
    assert job.outputs == job.reference() and set(job.emitted.values()) == {1}
    verdicts = [check_file(path) for path in paths]
    assert all(verdict.status == "ok" for verdict in verdicts), [v.summary() for v in verdicts if not v]
    rebuilt = sum(path.read_text().count('"rebuild"') for path in paths if path.name == "expansion.processor-2.jsonl")
    assert rebuilt > 0, "the new processor rebuilt its keys' state through a confluent-kafka Consumer"
