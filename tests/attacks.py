"""Hostile clients' requests, as functions: what tests/test_broker_attacks.py and bench/bench_attacks.py send.

    produce_raw(port, topic, batch_bytes)          # one Produce v9 to partition 0: its partition answer
    stored_batches(port, topic)                    # what a Fetch of partition 0 reads, batch by batch
    read_committed(bootstrap, topic, expected)     # a read_committed confluent-kafka consumer's values
    read_all(bootstrap, topic, isolation_level, expected)
    victim_transaction(bootstrap, topic, count)    # a transactional producer with `count` records in flight
    forged_abort(producer_id, epoch)               # an ABORT marker as a forger crafts it
    fetch_key_range(port, topic, partitions)       # a key-range Fetch of half the hash space
    metadata_by_topic_ids(count), send_and_read(port, frame)
    commit_ranges(port, topic, count), join_with_metadata(port, group, metadata)
"""

from __future__ import annotations

import socket
import struct
import uuid

from confluent_kafka import Consumer, Producer
from crafted_batches import CONTROL, TRANSACTIONAL, batch, record
from kio.index import load_request_schema

from kipcheck.impl.consumer.connection import decode_response, encode_entity, encode_request
from kipcheck.impl.wire.batches import split_batches
from kipcheck.impl.wire.codec import build
from kipcheck.impl.wire.errors import error_name
from kipcheck.oracle.conformance.probes.raw_client import RawClient
from kipcheck.oracle.conformance.scenarios.clients import QUIET

PRODUCE, FETCH, METADATA, OFFSET_COMMIT, JOIN_GROUP = 0, 1, 3, 8, 11
TIMEOUT_S = 60
HALF_HASH = 2**62 - 1
ABORT_KEY, MARKER_VALUE = struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 0)


def victim_transaction(bootstrap: str, topic: str, count: int) -> Producer:
    """A transactional producer whose open transaction holds `count` records of partition 0, flushed."""
    victim = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer", **QUIET})
    victim.init_transactions(TIMEOUT_S)
    victim.begin_transaction()
    for index in range(count):
        victim.produce(topic, value=b"entry-%d" % index, partition=0)
    victim.flush(TIMEOUT_S)
    return victim


def forged_abort(producer_id: int, producer_epoch: int, attributes: int = TRANSACTIONAL | CONTROL) -> bytes:
    """An ABORT marker with another producer's id and epoch."""
    return batch(record(0, key=ABORT_KEY, value=MARKER_VALUE), 1, producer_id=producer_id,
                 producer_epoch=producer_epoch, attributes=attributes)


def produce_raw(port: int, topic: str, records: bytes, transactional_id: str | None = None):
    """The partition answer of one Produce v9 of `records` to partition 0."""
    client = RawClient(port)
    answer = client.request(PRODUCE, 9, transactional_id=transactional_id, acks=-1, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}])
    client.close()
    return answer.responses[0].partition_responses[0]


def stored_batches(port: int, topic: str):
    """(batch, header) of every batch in partition 0, read uncommitted, as a Fetch sees them."""
    client = RawClient(port)
    answer = client.request(FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0,
                            session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
                                {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                                 "fetch_offset": 0, "last_fetched_epoch": -1,
                                                                 "log_start_offset": -1,
                                                                 "partition_max_bytes": 1 << 24}]}])
    client.close()
    records = bytes(answer.responses[0].partitions[0].records or b"")
    return split_batches(records) if records else []


def read_all(bootstrap: str, topic: str, isolation_level: str, expected: int) -> list[bytes]:
    """The values a fresh confluent-kafka consumer of `isolation_level` reads from the start of `topic`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": isolation_level,
                         "enable.auto.commit": False, **QUIET})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(TIMEOUT_S):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) >= expected and message is None:
                break
    finally:
        consumer.close()
    return values


def read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    return read_all(bootstrap, topic, "read_committed", expected)


def fetch_key_range(port: int, topic: str, partitions: int):
    """A Fetch v12 of every partition of `topic` for half the key-hash space: {partition: (error, records)}."""
    client = RawClient(port, timeout_s=600)
    answer = client.request(FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 26, isolation_level=0,
                            session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
                                {"topic": topic, "partitions": [
                                    {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                                     "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 24,
                                     "key_ranges": [0, HALF_HASH]} for partition in range(partitions)]}])
    client.close()
    if answer is None:
        return None
    return {part.partition_index: (error_name(part.error_code), bytes(part.records or b""))
            for part in answer.responses[0].partitions}


def many_tiny_records(count: int) -> bytes:
    return b"".join(record(index, key=b"", value=b"") for index in range(count))


def metadata_by_topic_ids(count: int) -> bytes:
    """A Metadata v12 frame asking for `count` topic ids nobody created."""
    body = build(load_request_schema(METADATA, 12), allow_auto_topic_creation=False,
                 include_topic_authorized_operations=False,
                 topics=[{"topic_id": uuid.UUID(int=index + 1), "name": None} for index in range(count)])
    return encode_entity(body, 1, "attacker")


def send_and_read(port: int, frame: bytes) -> int | None:
    """The size of the answer to one frame, None if the connection was closed instead."""
    with socket.create_connection(("127.0.0.1", port), timeout=600) as connection:
        connection.sendall(frame)
        header = connection.recv(4, socket.MSG_WAITALL)
        if len(header) < 4:
            return None
        size = struct.unpack(">i", header)[0]
        return len(connection.recv(size, socket.MSG_WAITALL))


def commit_ranges(port: int, topic: str, ranges_count: int) -> str | None:
    """The error of one OffsetCommit v9 of `ranges_count` single-offset ranges for partition 0 (a group
    with no member, as an admin commits), None if the connection was closed."""
    flat_ranges = [offset for number in range(ranges_count) for offset in (2 * number, 2 * number)]
    frame = encode_request(OFFSET_COMMIT, 9, 1, "attacker", {"group_id": "ledger-readers", "member_id": "",
                           "generation_id_or_member_epoch": -1, "topics": [{"name": topic, "partitions": [
                               {"partition_index": 0, "committed_offset": -1, "committed_metadata": None,
                                "offset_ranges": flat_ranges}]}]})
    with socket.create_connection(("127.0.0.1", port), timeout=600) as connection:
        connection.sendall(frame)
        header = connection.recv(4, socket.MSG_WAITALL)
        if len(header) < 4:
            return None
        answer = connection.recv(struct.unpack(">i", header)[0], socket.MSG_WAITALL)
    _, body = decode_response(OFFSET_COMMIT, 9, answer)
    return error_name(body.topics[0].partitions[0].error_code)


def join_with_metadata(port: int, group: str, metadata: bytes) -> int:
    """One classic member joining `group` with `metadata`: the protocol metadata bytes its JoinGroup answer
    lists (all members' for the leader)."""
    client = RawClient(port, timeout_s=120)
    body = dict(group_id=group, session_timeout=30000, rebalance_timeout=60000, member_id="", group_instance_id=None,
                protocol_type="consumer", protocols=[{"name": "range", "metadata": metadata}], reason=None)
    answer = client.request(JOIN_GROUP, 5, **body)
    if answer.error_code.name == "member_id_required":
        answer = client.request(JOIN_GROUP, 5, **{**body, "member_id": answer.member_id})
    client.close()
    return sum(len(member.metadata) for member in answer.members)
