"""Helpers for the Spark connector tests: topics with keyed records, reading a topic's records back."""

from __future__ import annotations

import itertools
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, produce

_names = itertools.count(1)
RANGE_FETCH = {"accept.range.fetch": "true"}   # the topic config kipcheck-keyrange's broker-side fetch needs


def fresh_topic(broker, partitions: int = 1, records: int = 0, keys: int = 7, prefix: str = "t",
                configs: dict | None = None) -> str:
    """A new topic (with topic `configs`) and `records` records: key k<i % keys> (every 11th without a key),
    value v<i>.

    They are produced 10 at a time: a share fetch hands out whole log batches (Kafka 4.2), so small
    batches let a micro-batch limit take effect.
    """
    name = f"{prefix}{next(_names)}"
    create_topic(broker.bootstrap, name, partitions, configs=configs)
    if records:
        produce_records(broker, name, partitions, 0, records, keys)
    return name


def produce_records(broker, topic: str, partitions: int, first: int, count: int, keys: int = 7,
                    chunk: int = 10) -> None:
    for start in range(first, first + count, chunk):
        produce(broker.bootstrap, topic, [(index % partitions, None if index % 11 == 10 else f"k{index % keys}".encode(),
                                           f"v{index}".encode()) for index in range(start, min(start + chunk, first + count))])


def serves_offset_commit(broker) -> bool:
    """Whether the broker answers OffsetFetch (consumer groups): kipcheck-keyrange commits through it."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kipcheck-probe", **QUIET})
    try:
        consumer.committed([TopicPartition("kipcheck-probe", 0)], timeout=10)
        return True
    except KafkaException:
        return False
    finally:
        consumer.close()


def assert_traces_pass(directory: Path, at_least: int = 1) -> list[Path]:
    paths = sorted(Path(directory).glob("*.jsonl"))
    assert len(paths) >= at_least, f"expected traces in {directory}"
    for path in paths:
        verdict = check_file(path)
        assert verdict, verdict.summary()
    return paths
