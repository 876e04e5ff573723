"""Real Kafka clients (confluent-kafka) for the broker scenarios: topics, producers, share and plain consumers.

Every wait is a poll loop with a deadline, never a sleep that asserts. Client
logs are turned down and reconnect backoff raised, so a broker restart does not
flood the output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kipcheck.impl.consumer.connection import BrokerConnection

INCREMENTAL_ALTER_CONFIGS, GROUP_RESOURCE, SET = 44, 32, 0
QUIET = {"log_level": 2, "reconnect.backoff.ms": 500, "reconnect.backoff.max.ms": 2000}


@dataclass(frozen=True)
class Delivered:
    """One record as a share consumer received it."""

    partition: int
    offset: int
    value: bytes
    delivery_count: int


def create_topic(bootstrap: str, name: str, partitions: int, timeout_s: float = 30,
                 configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(timeout_s)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]], timeout_s: float = 60,
            timestamp_ms: int | None = None, **config) -> list[tuple[int, int]]:
    """Produce (partition, key, value) records; returns their (partition, offset) in order. Raises on any failure.

    With `timestamp_ms`, record i is stamped timestamp_ms + i (to check millisecond timestamps survive).
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET, **config})
    results: list = [None] * len(records)
    errors: list = []

    def delivered(index):
        def report(error, message):
            if error is not None:
                errors.append(error)
            else:
                results[index] = (message.partition(), message.offset())
        return report

    for index, (partition, key, value) in enumerate(records):
        stamp = {} if timestamp_ms is None else {"timestamp": timestamp_ms + index}
        producer.produce(topic, value=value, key=key, partition=partition, on_delivery=delivered(index), **stamp)
        producer.poll(0)
    left = producer.flush(timeout_s)
    if left or errors or None in results:
        raise KafkaException(f"produce to {topic}: {left} undelivered, errors {errors[:3]}")
    return results


def set_share_group_earliest(connection: BrokerConnection, group: str) -> str:
    """Set the group config share.auto.offset.reset=earliest (IncrementalAlterConfigs, through kio: Kafka keeps it
    per group); the answer's error name ("none" when set)."""
    answer = connection.request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[{
        "resource_type": GROUP_RESOURCE, "resource_name": group,
        "configs": [{"name": "share.auto.offset.reset", "config_operation": SET, "value": "earliest"}]}])
    return answer.responses[0].error_code.name


def read_from_earliest(bootstrap: str, group: str) -> None:
    """The share group `group` starts reading at the log start, on a broker that keeps it per group (Kafka) as on
    one whose broker setting says so already."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    connection = BrokerConnection(host, int(port), "kipcheck-scenario", 30_000, 1_000_000)
    try:
        error = set_share_group_earliest(connection, group)
    finally:
        connection.close()
    if error != "none":
        raise KafkaException(f"share.auto.offset.reset=earliest for group {group}: {error.upper()}")


def share_consumer(bootstrap: str, group: str, topics: list[str], explicit: bool = False, **config) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit" if explicit else "implicit", **QUIET, **config})
    consumer.subscribe(topics)
    return consumer


def poll_records(consumer: ShareConsumer, timeout_s: float = 1.0) -> list:
    """One poll's records (messages with errors are skipped: they are client-side events)."""
    return [message for message in consumer.poll(timeout_s) if message.error() is None]


def as_delivered(message) -> Delivered:
    return Delivered(message.partition(), message.offset(), message.value(), message.delivery_count())


def read_plain(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 60) -> list:
    """Read a topic from the start with a plain Consumer (Fetch) until `expected` records arrived."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kipcheck-plain-reader",
                         "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
    records, deadline = [], time.monotonic() + timeout_s
    try:
        while len(records) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records.append(message)
    finally:
        consumer.close()
    return records
