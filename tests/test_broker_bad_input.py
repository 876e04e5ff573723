"""Bad input on the wire gets an error code or a closed connection, and the broker keeps serving.

Malformed frames, unknown API keys and versions, oversized requests,
acknowledgements of offsets never delivered, and requests from members the
broker does not know.
"""

from __future__ import annotations

import os
import struct
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.oracle.conformance.scenarios.clients import produce
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.probes.raw_client import RawClient

pytestmark = pytest.mark.slow

API_VERSIONS, METADATA, CREATE_TOPICS = 18, 3, 19
SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79


def still_serving(broker, raw_client) -> bool:
    answer = raw_client(broker).request(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    return answer is not None and answer.error_code == ErrorCode.none and broker.alive()


def share_fetch_body(member: str, epoch: int, topic: str = "bad", acks=(), wait_ms: int = 0, group: str = "g") -> dict:
    partitions = [{"partition_index": 0, "acknowledgement_batches": list(acks)}]
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": wait_ms, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
            "topics": [{"topic_id": topic_id_of(topic), "partitions": partitions}] if epoch != -1 else [],
            "forgotten_topics_data": []}


def create_topic(port: int, name: str) -> None:
    client = RawClient(port)
    created = client.request(CREATE_TOPICS, 7, topics=[
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], timeout=5000)
    client.close()
    assert created.topics[0].error_code == ErrorCode.none


def join(port: int, group: str, member: str, topic: str):
    client = RawClient(port)
    joined = client.request(SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=0,
                            subscribed_topic_names=[topic])
    client.close()
    assert joined.error_code == ErrorCode.none
    return joined


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker for the whole module: that it keeps serving after each bad input is the point.

    A member of group "g" subscribes to topic "bad", so the group's share-partition is initialized
    (Kafka 4.2 reads no share-partition before that) and the raw members below can fetch from it."""
    settings = {"socket.request.max.bytes": "65536", "share.auto.offset.reset": "earliest"}
    with EmbeddedBroker(tmp_path_factory.mktemp("bad-input"), settings) as broker:
        create_topic(broker.port, "bad")
        join(broker.port, "g", "subscriber", "bad")
        yield broker


@pytest.mark.parametrize("frame", [
    b"\x00\x00\x00\x03abc",                            # shorter than a request header
    struct.pack(">i", 12) + b"\x00\x03\x00\x0c" + b"\xff" * 8,  # Metadata v12 with a garbage body
    struct.pack(">i", -5),                             # negative length
    struct.pack(">i", 10) + b"\x03\xe7\x00\x00" + b"\x00" * 6,   # unknown API key 999
    struct.pack(">i", 10) + b"\x00\x00\x00\x63" + b"\x00" * 6,   # Produce v99
])
def test_malformed_or_unknown_frames_close_the_connection(broker, raw_client, frame):
    client = raw_client(broker)
    client.send(frame)
    assert client.closed_by_peer()
    assert still_serving(broker, raw_client)


def test_oversized_request_closes_the_connection(broker, raw_client):
    client = raw_client(broker)
    client.send(struct.pack(">i", 65537) + b"\x00\x12\x00\x03")
    assert client.closed_by_peer()
    assert still_serving(broker, raw_client)


def test_api_versions_of_an_unknown_version_answers_unsupported_with_the_list(broker, raw_client):
    client = raw_client(broker)
    client.send(struct.pack(">ihhi", 8, API_VERSIONS, 77, 42))
    frame = client.read_frame()
    (correlation_id, error) = struct.unpack_from(">ih", frame)
    assert correlation_id == 42 and error == ErrorCode.unsupported_version
    assert still_serving(broker, raw_client)


def test_metadata_by_unknown_topic_id(broker, raw_client):
    answer = raw_client(broker).request(METADATA, 12, topics=[{"topic_id": uuid.uuid4(), "name": None}],
                                        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert answer.topics[0].error_code == ErrorCode.unknown_topic_id
    known = raw_client(broker).request(METADATA, 12, topics=[{"topic_id": topic_id_of("bad"), "name": None}],
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert known.topics[0].name == "bad" and len(known.topics[0].partitions) == 1


def test_acknowledging_offsets_never_delivered_is_an_error(broker, raw_client):
    client = raw_client(broker)
    opened = client.request(SHARE_FETCH, 1, **share_fetch_body("m1", 0))
    assert opened.error_code == ErrorCode.none
    acks = [{"first_offset": 0, "last_offset": 5, "acknowledge_types": [1]}]
    body = share_fetch_body("m1", 1, acks=acks)
    answer = client.request(SHARE_ACKNOWLEDGE, 1, group_id="g", member_id="m1", share_session_epoch=1,
                            topics=body["topics"])
    assert answer.error_code == ErrorCode.none
    partition_error = answer.responses[0].partitions[0].error_code
    assert partition_error in (ErrorCode.invalid_request, ErrorCode.invalid_record_state)
    malformed = [{"first_offset": 5, "last_offset": 2, "acknowledge_types": [1]}]
    fetched = client.request(SHARE_FETCH, 1, **share_fetch_body("m1", 2, acks=malformed))
    assert fetched.error_code == ErrorCode.none
    assert fetched.responses[0].partitions[0].acknowledge_error_code == ErrorCode.invalid_request
    wrong_types = [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [1, 7]}]
    fetched = client.request(SHARE_FETCH, 1, **share_fetch_body("m1", 3, acks=wrong_types))
    assert fetched.responses[0].partitions[0].acknowledge_error_code == ErrorCode.invalid_request
    assert still_serving(broker, raw_client)


def test_acknowledging_in_a_share_partition_no_fetch_loaded_is_unknown_topic_or_partition(broker, raw_client):
    """Kafka 4.2's leader knows a share-partition only once a ShareFetch of it loaded it (SharePartitionManager's
    cache); an acknowledgement before that is UNKNOWN_TOPIC_OR_PARTITION, even where its state is initialized
    (found by comparing the two brokers, `conform --compare`: the reference broker answered INVALID_RECORD_STATE).
    After a fetch loaded it, the same acknowledgement is judged against its records."""
    create_topic(broker.port, "unloaded")
    join(broker.port, "late-loaders", "subscriber", "unloaded")   # initialized: a member subscribed to the topic
    client = raw_client(broker)
    opening = {**share_fetch_body("m5", 0, topic="unloaded", group="late-loaders"), "topics": []}
    assert client.request(SHARE_FETCH, 1, **opening).error_code == ErrorCode.none
    acks = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
    topics = share_fetch_body("m5", 1, topic="unloaded", acks=acks)["topics"]
    answer = client.request(SHARE_ACKNOWLEDGE, 1, group_id="late-loaders", member_id="m5", share_session_epoch=1,
                            topics=topics)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    fetched = client.request(SHARE_FETCH, 1, **share_fetch_body("m5", 2, topic="unloaded", group="late-loaders"))
    assert fetched.error_code == ErrorCode.none
    answer = client.request(SHARE_ACKNOWLEDGE, 1, group_id="late-loaders", member_id="m5", share_session_epoch=3,
                            topics=topics)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state


def test_requests_from_unknown_members_get_errors(broker, raw_client):
    client = raw_client(broker)
    assert client.request(SHARE_FETCH, 1, **share_fetch_body("ghost", 7)).error_code == ErrorCode.share_session_not_found
    assert client.request(SHARE_ACKNOWLEDGE, 1, group_id="g", member_id="ghost", share_session_epoch=0,
                          topics=[]).error_code == ErrorCode.invalid_share_session_epoch
    assert client.request(SHARE_ACKNOWLEDGE, 1, group_id="g", member_id="ghost", share_session_epoch=-1,
                          topics=[]).error_code == ErrorCode.share_session_not_found
    heartbeat = client.request(SHARE_GROUP_HEARTBEAT, 1, group_id="g", member_id="ghost", member_epoch=4)
    assert heartbeat.error_code == ErrorCode.unknown_member_id
    joined = client.request(SHARE_GROUP_HEARTBEAT, 1, group_id="g", member_id="m2", member_epoch=0,
                            subscribed_topic_names=["bad"])
    assert joined.error_code == ErrorCode.none and joined.member_epoch > 0
    assert joined.assignment.topic_partitions[0].topic_id == topic_id_of("bad")
    fenced = client.request(SHARE_GROUP_HEARTBEAT, 1, group_id="g", member_id="m2", member_epoch=joined.member_epoch + 5)
    assert fenced.error_code == ErrorCode.fenced_member_epoch
    assert still_serving(broker, raw_client)


def test_acks_on_an_opening_fetch_are_invalid(broker, raw_client):
    acks = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
    answer = raw_client(broker).request(SHARE_FETCH, 1, **share_fetch_body("m3", 0, acks=acks))
    assert answer.error_code == ErrorCode.invalid_request
    assert still_serving(broker, raw_client)


def test_share_group_describe(broker, raw_client):
    client = raw_client(broker)
    missing = client.request(77, 1, group_ids=["nobody"], include_authorized_operations=False)
    assert missing.groups[0].error_code == ErrorCode.group_id_not_found
    joined = client.request(SHARE_GROUP_HEARTBEAT, 1, group_id="d", member_id="m9", member_epoch=0,
                            subscribed_topic_names=["bad"])
    described = client.request(77, 1, group_ids=["d"], include_authorized_operations=False).groups[0]
    assert described.error_code == ErrorCode.none and described.group_state == "Stable"
    (member,) = described.members
    assert member.member_id == "m9" and member.member_epoch == joined.member_epoch
    assert member.assignment.topic_partitions[0].topic_name == "bad"


def test_list_offsets_earliest_and_latest(broker, raw_client):
    client = raw_client(broker)
    partitions = [{"partition_index": 0, "timestamp": -2}, {"partition_index": 0, "timestamp": -1},
                  {"partition_index": 9, "timestamp": -1}]
    answer = client.request(2, 7, replica_id=-1, isolation_level=0, topics=[{"name": "bad", "partitions": partitions}])
    earliest, latest, missing = answer.topics[0].partitions
    assert earliest.error_code == latest.error_code == ErrorCode.none and earliest.offset <= latest.offset
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


def test_pipelined_requests_are_answered_in_order(broker, raw_client):
    client = raw_client(broker)
    slow = client.encode(SHARE_FETCH, 1, **share_fetch_body("m5", 0, wait_ms=400))  # long-polls: no records
    fast = client.encode(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    client.send(slow + fast)
    first, second = client.read_frame(), client.read_frame()
    assert struct.unpack_from(">i", first)[0] < struct.unpack_from(">i", second)[0]


def test_a_session_ends_with_its_own_connection_not_a_strangers(broker, raw_client):
    owner, stranger = raw_client(broker), raw_client(broker)
    assert owner.request(SHARE_FETCH, 1, **share_fetch_body("m7", 0)).error_code == ErrorCode.none
    refused = stranger.request(SHARE_FETCH, 1, **share_fetch_body("m7", 9))
    assert refused.error_code == ErrorCode.invalid_share_session_epoch
    stranger.close()
    for epoch in range(1, 6):  # over a second in which the broker sees the stranger's connection close
        assert owner.request(SHARE_FETCH, 1, **share_fetch_body("m7", epoch, wait_ms=250)).error_code == ErrorCode.none
    owner.close()
    deadline, late = time.monotonic() + 30, None
    while time.monotonic() < deadline and late != ErrorCode.share_session_not_found:
        late = raw_client(broker).request(SHARE_FETCH, 1, **share_fetch_body("m7", 99)).error_code
        assert late in (ErrorCode.invalid_share_session_epoch, ErrorCode.share_session_not_found)
    assert late == ErrorCode.share_session_not_found


def test_a_member_that_never_joined_reads_only_what_its_group_subscribed_to(broker, raw_client, tmp_path):
    """Kafka 4.2: the session opens for anyone; a share-partition nobody in the group subscribed to
    is uninitialized (UNKNOWN_SERVER_ERROR, acknowledgements UNKNOWN_TOPIC_OR_PARTITION) until someone does."""
    create_topic(broker.port, "open")
    produce(broker.bootstrap, "open", [(0, b"k", b"v")] * 3)
    client = raw_client(broker)
    opened = client.request(SHARE_FETCH, 1, **share_fetch_body("stranger", 0, "open", group="strangers"))
    assert opened.error_code == ErrorCode.none
    (partition,) = opened.responses[0].partitions
    assert partition.error_code == ErrorCode.unknown_server_error and not partition.acquired_records
    acks = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
    acked = client.request(SHARE_ACKNOWLEDGE, 1, group_id="strangers", member_id="stranger", share_session_epoch=1,
                           topics=share_fetch_body("stranger", 1, "open", acks, group="strangers")["topics"])
    assert acked.error_code == ErrorCode.none
    assert acked.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    join(broker.port, "strangers", "subscriber", "open")
    fetched = client.request(SHARE_FETCH, 1, **share_fetch_body("stranger", 2, "open", group="strangers", wait_ms=5000))
    (partition,) = fetched.responses[0].partitions
    assert partition.error_code == ErrorCode.none
    assert [(batch.first_offset, batch.last_offset) for batch in partition.acquired_records] == [(0, 2)]
    assert still_serving(broker, raw_client)


@pytest.mark.parametrize("member", ["", "m" * 37])
def test_member_ids_kafka_refuses_are_invalid_requests(broker, raw_client, member):
    client = raw_client(broker)
    assert client.request(SHARE_FETCH, 1, **share_fetch_body(member, 0)).error_code == ErrorCode.invalid_request
    assert client.request(SHARE_ACKNOWLEDGE, 1, group_id="g", member_id=member, share_session_epoch=1,
                          topics=[]).error_code == ErrorCode.invalid_request


def test_the_kip_profile_serves_a_member_that_never_joined(tmp_path, raw_client):
    with EmbeddedBroker(tmp_path, {"share.auto.offset.reset": "earliest"}, profile="kip") as broker:
        create_topic(broker.port, "open")
        produce(broker.bootstrap, "open", [(0, b"k", b"v")] * 3)
        fetched = raw_client(broker).request(SHARE_FETCH, 1, **share_fetch_body("stranger", 0, "open", wait_ms=5000))
        (partition,) = fetched.responses[0].partitions
        assert partition.error_code == ErrorCode.none and partition.acquired_records[0].last_offset == 2


def test_names_too_long_for_a_trace_file_are_served(broker, raw_client):
    """A legal 249-character topic and a 1,000-character group id: their trace files get hashed names."""
    topic, group = "t." * 124 + "t", "g" * 1000
    create_topic(broker.port, topic)
    join(broker.port, group, "subscriber", topic)
    fetched = raw_client(broker).request(SHARE_FETCH, 1, **share_fetch_body("m1", 0, topic, group=group))
    assert fetched.error_code == ErrorCode.none
    assert all(partition.error_code == ErrorCode.none for topic in fetched.responses for partition in topic.partitions)
    assert "Traceback" not in broker.log_path.read_text()


def test_bytes_after_a_request_body_are_ignored_as_kafka_ignores_them(broker, raw_client):
    """librdkafka's AdminClient.list_topics sends Metadata v12 with three bytes after the body; Kafka's
    AbstractRequest.parseRequest reads what the schema holds and leaves the rest, so the answer must come."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})
    assert "bad" in admin.list_topics(timeout=30).topics
    client = raw_client(broker)
    client.send(_with_trailing_bytes(client.encode(18, 3, client_software_name="t", client_software_version="1")))
    assert client.read_response(18, 3).error_code == 0


def _with_trailing_bytes(frame: bytes) -> bytes:
    body = frame[4:] + b"\x01\x00\x00"
    return len(body).to_bytes(4, "big") + body


def test_the_broker_starts_for_a_caller_holding_descriptors_past_1024(tmp_path):
    """A long test run holds many descriptors; waiting for the broker's start must not depend on their number."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        broker = EmbeddedBroker(tmp_path, {})
        broker.start()
        client = RawClient(broker.port)
        assert still_serving(broker, lambda _: client)
        client.close()
        broker.stop()
    finally:
        for descriptor in held:
            os.close(descriptor)
