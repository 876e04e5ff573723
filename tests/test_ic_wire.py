"""Individual commit and key-range fetch for real: the reference broker, the kio consumer, confluent-kafka beside them.

Several consumers share one partition by key range (KR-10), commit the ranges they processed (IC-2, IC-11),
hand a key range over (IC-15) and survive a kill -9 of the broker (IC-12); every ic trace, the coordinator's
and the consumers', is judged by the oracle. Plain clients keep working and see the same committed offset.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from kipcheck.impl.consumer import Consumer, IllegalState, KafkaError, TopicPartition
from kipcheck.impl.consumer.individual import KeySharingTraces
from kipcheck.model.key_range_assign import split
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.clients import QUIET
from kipcheck.oracle.conformance.embedded import EmbeddedBroker

pytestmark = pytest.mark.slow

TOPIC, GROUP, RECORDS = "orders", "sharers", 400
TP = TopicPartition(TOPIC, 0)


def create_topic(bootstrap: str, name: str, accept_range_fetch: bool) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    configs = {"accept.range.fetch": "true"} if accept_range_fetch else {}
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for number in range(start, start + count):
        producer.produce(topic, key=f"user-{number % 37}".encode(), value=f"v{number}".encode())
    assert producer.flush(30) == 0


def kio_consumer(bootstrap: str, traces: KeySharingTraces | None = None, **settings) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                     "fetch.max.wait.ms": 100, "max.poll.records": 10, **settings}, ic_traces=traces)


def consume(consumer: Consumer, processed: list, until, commit_every: int = 7) -> None:
    """Poll, 'process' (record the offset), commit the processed ranges every few records, until `until()`."""
    batch: list[int] = []
    while not until():
        for record in consumer.poll(200):
            processed.append(record.offset)
            batch.append(record.offset)
            if len(batch) >= commit_every:
                consumer.commit_ranges({TP: [(offset, offset) for offset in batch]})
                batch.clear()
    if batch:
        consumer.commit_ranges({TP: [(offset, offset) for offset in batch]})


def plain_committed(bootstrap: str, topic: str = TOPIC) -> int:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, **QUIET})
    try:
        [committed] = consumer.committed([KafkaTopicPartition(topic, 0)], timeout=30)
        return committed.offset
    finally:
        consumer.close()


def assert_traces_pass(*directories: Path) -> list[Path]:
    paths = [path for directory in directories for path in sorted(Path(directory).glob("ic*.jsonl"))]
    assert paths
    for path in paths:
        verdict = check_file(path)
        assert verdict, verdict.summary()
    return paths


def test_the_fields_ride_as_tagged_fields_that_only_the_extended_schemas_read():
    """IC-20: OffsetRanges round-trips through the extended OffsetCommit v9 schema; kio's own schema refuses the
    unknown tag (so both ends use impl/ic/wire.py), and a plain commit carries no tag at all."""
    import io

    from kio.index import load_request_schema
    from kio.serial import entity_reader, entity_writer

    from kipcheck.impl.broker.codec import build
    from kipcheck.impl.ic.wire import flat, pairs, request_schema

    def encoded(schema, partition: dict) -> bytes:
        buffer = io.BytesIO()
        entity_writer(schema)(buffer, build(schema, {"group_id": "g", "member_id": "", "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": -1, "committed_metadata": None,
                                            **partition}]}]}))
        return buffer.getvalue()

    extended, plain = request_schema(8, 9), load_request_schema(8, 9)
    frame = encoded(extended, {"offset_ranges": flat([(41, 42), (46, 47)])})
    body, _ = entity_reader(extended)(frame, 0)
    assert pairs(body.topics[0].partitions[0].offset_ranges) == [(41, 42), (46, 47)]
    with pytest.raises(Exception, match="tag"):
        entity_reader(plain)(frame, 0)
    assert encoded(extended, {}) == encoded(plain, {})
    assert len(frame) - len(encoded(plain, {})) == 2 + 1 + 1 + 2 * 16   # tag, size, count, 16 bytes a range
    with pytest.raises(ValueError):
        pairs((1, 2, 3))


def test_four_consumers_share_one_partition_by_key_range(tmp_path):
    """KR-10, IC-2, IC-11, IC-21: every record processed exactly once, by the owner of its key; the plain
    committed offset a confluent-kafka consumer reads is the IC stable offset + 1; every trace passes."""
    traces = KeySharingTraces(tmp_path / "client-traces")
    with EmbeddedBroker(tmp_path) as broker:
        create_topic(broker.bootstrap, TOPIC, accept_range_fetch=True)
        produce(broker.bootstrap, TOPIC, RECORDS)
        consumers = [kio_consumer(broker.bootstrap, traces) for _ in range(4)]
        processed: list[list[int]] = [[] for _ in consumers]
        total = lambda: sum(len(offsets) for offsets in processed)  # noqa: E731
        threads = []
        for consumer, share, offsets in zip(consumers, split(4), processed):
            consumer.assign({TP: [share]})
            threads.append(threading.Thread(target=consume, args=(consumer, offsets, lambda: total() >= RECORDS)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        for consumer in consumers:
            consumer.close()
        traces.close()
        every = sorted(offset for offsets in processed for offset in offsets)
        assert every == list(range(RECORDS)), "each record processed once"
        assert all(len(offsets) > RECORDS // 10 for offsets in processed), [len(offsets) for offsets in processed]
        assert plain_committed(broker.bootstrap) == RECORDS
    assert assert_traces_pass(broker.trace_dir, tmp_path / "client-traces")


def test_a_key_range_handed_over_is_read_again_from_its_first_uncommitted_record(tmp_path):
    """IC-15: m1 owns every key, processes part, gives half up; m2 takes it and gets the uncommitted records
    of those keys. Nothing is lost and nothing processed twice; the handoff is judged in the client trace."""
    traces = KeySharingTraces(tmp_path / "client-traces")
    lower, upper = split(2)
    with EmbeddedBroker(tmp_path) as broker:
        create_topic(broker.bootstrap, TOPIC, accept_range_fetch=True)
        produce(broker.bootstrap, TOPIC, RECORDS)
        first, second = kio_consumer(broker.bootstrap, traces), kio_consumer(broker.bootstrap, traces)
        first.assign({TP: []})
        done_first: list[int] = []
        consume(first, done_first, lambda: len(done_first) >= RECORDS // 3)
        first.assign({TP: [lower]})               # gives the upper half up (its processed offsets committed)
        second.assign({TP: [upper]})
        done_second: list[int] = []
        threads = [threading.Thread(target=consume, args=(consumer, offsets, lambda: len(done_first) +
                                                          len(done_second) >= RECORDS))
                   for consumer, offsets in ((first, done_first), (second, done_second))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        first.close()
        second.close()
        traces.close()
        assert sorted(done_first + done_second) == list(range(RECORDS))
        assert len(done_second) > RECORDS // 4, "the second consumer took over keys"
        assert plain_committed(broker.bootstrap) == RECORDS
    assert_traces_pass(broker.trace_dir, tmp_path / "client-traces")


def test_kill_9_of_the_broker_loses_no_commit(tmp_path):
    """IC-12: commits answered NONE survive a SIGKILL at any point; the consumer resumes after them."""
    with EmbeddedBroker(tmp_path) as broker:
        create_topic(broker.bootstrap, TOPIC, accept_range_fetch=True)
        produce(broker.bootstrap, TOPIC, RECORDS)
        answered: set[int] = set()
        for round_number in range(3):
            consumer = kio_consumer(broker.bootstrap, **{"default.api.timeout.ms": 3000})
            consumer.assign({TP: [split(2)[round_number % 2]]})
            try:
                for _ in range(5):
                    offsets = [record.offset for record in consumer.poll(500)]
                    assert not set(offsets) & answered, "a committed record was returned again"
                    if offsets:
                        consumer.commit_ranges({TP: [(offset, offset) for offset in offsets[::2]]})
                        answered |= set(offsets[::2])
                broker.kill()
                broker.start()
            finally:
                consumer.close()
        checker = kio_consumer(broker.bootstrap)
        checker.assign({TP: []})
        seen: list[int] = []
        while len(seen) < RECORDS - len(answered):
            seen += [record.offset for record in checker.poll(500)]
        checker.close()
        assert not set(seen) & answered and set(seen) | answered == set(range(RECORDS))
    assert_traces_pass(broker.trace_dir)


def test_switches_answer_the_seeds_errors(tmp_path):
    """KR-11 and IC-7: TOPIC_RANGE_FETCH_NOT_ALLOWED, CONSUMER_RANGE_FETCH_NOT_ACCEPTED, INDIVIDUAL_COMMIT_NOT_ALLOWED;
    accept.range.fetch through DescribeConfigs and IncrementalAlterConfigs."""
    with EmbeddedBroker(tmp_path, settings={"accept.individual.commit": "false"}) as broker:
        create_topic(broker.bootstrap, "closed", accept_range_fetch=False)
        produce(broker.bootstrap, "closed", 10)
        consumer = kio_consumer(broker.bootstrap)
        consumer.assign({TopicPartition("closed", 0): [split(2)[0]]})
        with pytest.raises(KafkaError) as refused:
            for _ in range(20):
                consumer.poll(200)
        assert refused.value.error == "TOPIC_RANGE_FETCH_NOT_ALLOWED"
        consumer.close()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "closed")
        assert admin.describe_configs([resource])[resource].result(30)["accept.range.fetch"].value == "false"
        resource.add_incremental_config(ConfigEntry("accept.range.fetch", "true",
                                                    incremental_operation=AlterConfigOpType.SET))
        admin.incremental_alter_configs([resource])[resource].result(30)
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "closed")])
        assert next(iter(described.values())).result(30)["accept.range.fetch"].value == "true"
        consumer = kio_consumer(broker.bootstrap)
        consumer.assign({TopicPartition("closed", 0): [split(2)[0]]})
        records = []
        for _ in range(20):
            records += consumer.poll(200)
        assert 0 < len(records) < 10
        with pytest.raises(KafkaError) as not_allowed:
            consumer.commit_ranges({TopicPartition("closed", 0): [(records[0].offset, records[0].offset)]})
        assert not_allowed.value.error == "INDIVIDUAL_COMMIT_NOT_ALLOWED"
        consumer.close()
        shy = kio_consumer(broker.bootstrap, **{"allow.individual.commit": "false"})
        with pytest.raises(KafkaError) as not_accepted:
            shy.assign({TopicPartition("closed", 0): [split(2)[0]]})
        assert not_accepted.value.error == "CONSUMER_RANGE_FETCH_NOT_ACCEPTED"
        with pytest.raises(IllegalState):
            shy.commit_ranges({TopicPartition("closed", 0): [(0, 0)]})
        shy.close()


def test_a_plain_commit_of_an_individually_committed_partition(tmp_path):
    """IC-19: a confluent-kafka commit moves the stable offset forward like an IC commit of everything below it,
    a rewind below it is INDIVIDUAL_COMMIT_TOO_OLD, and committing the same offset again is accepted."""
    with EmbeddedBroker(tmp_path) as broker:
        create_topic(broker.bootstrap, TOPIC, accept_range_fetch=True)
        produce(broker.bootstrap, TOPIC, 50)
        consumer = kio_consumer(broker.bootstrap)
        consumer.assign({TP: []})
        consumer.commit_ranges({TP: [(0, 9), (20, 24)]})
        assert plain_committed(broker.bootstrap) == 10
        plain = KafkaConsumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, **QUIET})
        plain.commit(offsets=[KafkaTopicPartition(TOPIC, 0, 20)], asynchronous=False)   # folds [20, 24]
        assert plain_committed(broker.bootstrap) == 25
        plain.commit(offsets=[KafkaTopicPartition(TOPIC, 0, 25)], asynchronous=False)   # the same again
        with pytest.raises(KafkaException):
            plain.commit(offsets=[KafkaTopicPartition(TOPIC, 0, 5)], asynchronous=False)  # a rewind
        plain.close()
        consumer.close()
        assert plain_committed(broker.bootstrap) == 25
    assert_traces_pass(broker.trace_dir)
