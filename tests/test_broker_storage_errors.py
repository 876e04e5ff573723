"""The broker's answers when its disk refuses a write: Kafka's errors, nothing stored, service resumes.

The broker runs in-process over a FaultyDisk (tests/harness.py); requests
come from a kio RawClient (to read exact error codes) and from real
confluent-kafka clients (to show they recover): Produce answers
KAFKA_STORAGE_ERROR, CreateTopics KAFKA_STORAGE_ERROR, ShareAcknowledge and
ShareFetch's acknowledgements COORDINATOR_NOT_AVAILABLE, a ShareFetch whose
share-partition cannot be initialized COORDINATOR_NOT_AVAILABLE in the
partition; each failed write leaves no trace in the data, and the traces
record the failure exactly as answered. (These traces are not judged here:
the oracle's clause for a retriable failure that changes nothing is separate
work.)
"""

from __future__ import annotations

import errno
import json

import harness  # tests/harness.py
import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.impl.share.coordinator import LOG_NAME
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, read_plain

record_batch = harness.record_batch
PRODUCE, METADATA, CREATE_TOPICS, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 0, 3, 19, 76, 78, 79


def produce_once(client, topic: str, records: bytes):
    answer = client.request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}])
    return answer.responses[0].partition_responses[0]


def create_once(client, name: str):
    answer = client.request(CREATE_TOPICS, 7, timeout=5000, validate_only=False, topics=[
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    return answer.topics[0]


@pytest.mark.parametrize("faults", [
    [("short_write", errno.ENOSPC), ("write", errno.ENOSPC)],
    [("write", errno.ENOSPC)],
    [("sync", errno.EIO)],
], ids=["short write", "ENOSPC", "EIO on fsync"])
def test_a_produce_the_disk_refuses_answers_kafka_storage_error_and_stores_nothing(
        faults, faulty_disk, in_process_broker, raw_client):
    broker = in_process_broker(faulty_disk, log_flush_interval_messages=1)
    client = raw_client(broker)
    assert create_once(client, "t").error_code == ErrorCode.none
    assert produce_once(client, "t", record_batch(3)).base_offset == 0
    for operation, error in faults:
        faulty_disk.fail(operation, error, path="t-0")
    refused = produce_once(client, "t", record_batch(5))
    assert refused.error_code == ErrorCode.kafka_storage_error and refused.base_offset == -1
    assert refused.error_message and "failed" in refused.error_message
    stored = produce_once(client, "t", record_batch(2))      # the same connection, the next offset
    assert stored.error_code == ErrorCode.none and stored.base_offset == 3
    assert broker.call(lambda: broker.broker.find_log("t", 0).batch_ranges()) == [(0, 2), (3, 4)]


def test_a_real_producer_loses_nothing_through_short_writes_and_a_full_disk(faulty_disk, in_process_broker):
    broker = in_process_broker(faulty_disk)
    create_topic(broker.bootstrap, "t", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 20,
                         "retry.backoff.ms": 50, **QUIET})
    delivered, failed = [], []
    values = [f"record-{index}".encode() for index in range(300)]
    for number, value in enumerate(values):
        if number % 100 == 50:       # now and then a torn write, then a disk full for a while
            faulty_disk.fail("short_write", path="t-0")
            faulty_disk.fail("write", errno.ENOSPC, path="t-0", times=2)
        producer.produce("t", value=value, on_delivery=lambda error, message: (
            failed if error else delivered).append(message.value()))
        producer.poll(0.002)
    assert producer.flush(60) == 0 and not failed
    assert faulty_disk.fired == 9
    stored = [record.value() for record in read_plain(broker.bootstrap, "t", 1, len(values))]
    assert stored == values and sorted(delivered) == sorted(values)   # each once, in order


def test_no_batch_is_stored_after_a_first_one_the_disk_refused(faulty_disk, in_process_broker, raw_client):
    # librdkafka bumps an idempotent producer's epoch itself and pipelines the new epoch's batches; when a
    # later one succeeds it takes every earlier unacknowledged batch as stored (its "implicit ack"). So a
    # new epoch, or a producer new to the partition, that does not start at sequence 0 must be refused, or
    # the refused first batch is reported delivered and is lost.
    broker = in_process_broker(faulty_disk)
    client = raw_client(broker)
    assert create_once(client, "t").error_code == ErrorCode.none
    assert produce_once(client, "t", record_batch(3, producer_id=7, sequence=0, epoch=0)).base_offset == 0
    faulty_disk.fail("write", errno.ENOSPC, path="t-0")
    first = produce_once(client, "t", record_batch(3, producer_id=7, sequence=0, epoch=1))
    assert first.error_code == ErrorCode.kafka_storage_error
    second = produce_once(client, "t", record_batch(2, producer_id=7, sequence=3, epoch=1))
    assert second.error_code == ErrorCode.out_of_order_sequence_number and second.base_offset == -1
    assert produce_once(client, "t", record_batch(3, producer_id=7, sequence=0, epoch=1)).base_offset == 3
    assert produce_once(client, "t", record_batch(2, producer_id=7, sequence=3, epoch=1)).base_offset == 6
    stale = produce_once(client, "t", record_batch(1, producer_id=7, sequence=3, epoch=0))
    assert stale.error_code == ErrorCode.invalid_producer_epoch and stale.base_offset == -1
    faulty_disk.fail("write", errno.ENOSPC, path="t-0")    # the same for a producer's first batch in a partition
    assert produce_once(client, "t", record_batch(2, producer_id=9, sequence=0, epoch=0)).error_code == \
        ErrorCode.kafka_storage_error
    fresh = produce_once(client, "t", record_batch(1, producer_id=9, sequence=2, epoch=0))
    assert fresh.error_code == ErrorCode.out_of_order_sequence_number
    assert broker.call(lambda: broker.broker.find_log("t", 0).batch_ranges()) == [(0, 2), (3, 5), (6, 7)]


def test_a_topic_the_disk_refuses_is_not_created(faulty_disk, in_process_broker, raw_client):
    broker = in_process_broker(faulty_disk)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    faulty_disk.fail("rename", path="topics.json")
    with pytest.raises(KafkaException, match="KAFKA_STORAGE_ERROR"):
        admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
    assert known_partitions(raw_client(broker), "orders") is None
    assert not (broker.broker.data_dir / "topics.json").exists()
    admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
    assert known_partitions(raw_client(broker), "orders") == 2


def known_partitions(client, topic: str) -> int | None:
    answer = client.request(METADATA, 12, topics=[{"topic_id": None, "name": topic}], allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False).topics[0]
    return len(answer.partitions) if answer.error_code == ErrorCode.none else None


def join(client, group: str, member: str, topic: str) -> None:
    joined = client.request(SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=0,
                            subscribed_topic_names=[topic])
    assert joined.error_code == ErrorCode.none


def share_fetch(client, member: str, epoch: int, topic: str, acks=(), wait_ms: int = 200):
    return client.request(SHARE_FETCH, 1, group_id="g", member_id=member, share_session_epoch=epoch,
                          max_wait=wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
                          forgotten_topics_data=[], topics=[{"topic_id": topic_id_of(topic), "partitions": [
                              {"partition_index": 0, "acknowledgement_batches": list(acks)}]}])


def test_share_apis_answer_coordinator_not_available_when_the_share_state_cannot_be_written(
        faulty_disk, in_process_broker, raw_client):
    broker = in_process_broker(faulty_disk, share_auto_offset_reset="earliest")
    client = raw_client(broker)
    assert create_once(client, "s").error_code == ErrorCode.none
    produce_once(client, "s", record_batch(5))
    # The disk refuses before the member subscribes: neither its heartbeat's initialization of the share state
    # (kafka-4.2, spec ST-2) nor the first fetch's can be written, so the share-partition cannot start.
    faulty_disk.fail("write", path=LOG_NAME, times=None)
    join(client, "g", "m1", "s")
    refused = share_fetch(client, "m1", 0, "s").responses[0].partitions[0]
    assert refused.error_code == ErrorCode.coordinator_not_available and not refused.acquired_records
    faulty_disk.heal()
    fetched = share_fetch(client, "m1", 1, "s").responses[0].partitions[0]
    assert fetched.error_code == ErrorCode.none
    assert [(batch.first_offset, batch.last_offset) for batch in fetched.acquired_records] == [(0, 4)]
    accept = [{"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}]
    faulty_disk.fail("sync", errno.EIO, path=LOG_NAME)
    acknowledged = client.request(SHARE_ACKNOWLEDGE, 1, group_id="g", member_id="m1", share_session_epoch=2,
                                  topics=[{"topic_id": topic_id_of("s"), "partitions": [
                                      {"partition_index": 0, "acknowledgement_batches": accept}]}])
    assert acknowledged.error_code == ErrorCode.none
    assert acknowledged.responses[0].partitions[0].error_code == ErrorCode.coordinator_not_available
    faulty_disk.fail("write", errno.ENOSPC, path=LOG_NAME)
    piggybacked = share_fetch(client, "m1", 3, "s", acks=accept, wait_ms=0).responses[0].partitions[0]
    assert piggybacked.acknowledge_error_code == ErrorCode.coordinator_not_available
    assert share_fetch(client, "m1", 4, "s", acks=accept, wait_ms=0).responses[0].partitions[0].acknowledge_error_code \
        == ErrorCode.none
    assert broker.call(lambda: broker.broker.engine.partitions[("g", TopicPartition("s", 0))].spso) == 5
    traced = traced_errors(broker)
    assert traced["share-partition"] == ["COORDINATOR_NOT_AVAILABLE", "COORDINATOR_NOT_AVAILABLE", "NONE"]
    assert traced["share-state"][-3:] == ["COORDINATOR_NOT_AVAILABLE", "COORDINATOR_NOT_AVAILABLE", "NONE"]
    assert "COORDINATOR_NOT_AVAILABLE" in traced["share-state"][:-3]   # the initializations the disk refused


def traced_errors(broker) -> dict[str, list[str]]:
    """The errors the broker traced: share-partition acknowledgements, share-state initializations and writes."""
    return {machine: [json.loads(line)["observed"]["error"]
                      for path in sorted(broker.trace_dir.glob(f"{machine}.*.jsonl"))
                      for line in path.read_text().splitlines()[1:] if json.loads(line)["op"] in ops]
            for machine, ops in (("share-partition", ("acknowledge",)), ("share-state", ("initialize", "write")))}
