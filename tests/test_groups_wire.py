"""Consumer-group APIs over the wire with a raw kio client: the error paths no well-behaved client takes.

Unknown members, fenced and stale epochs, illegal generations, rebalances in
progress, unsupported assignors, group ids of the wrong type, unknown topics;
every answer is decoded by kio, so its encoding is checked too.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.probes.raw_client import RawClient

pytestmark = pytest.mark.slow

CREATE_TOPICS, OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 19, 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, OFFSET_DELETE = 15, 16, 47
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_HEARTBEAT = 68, 69, 76
SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
            "group.consumer.session.timeout.ms": "60000", "group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("groups-wire"), SETTINGS) as broker:
        client = RawClient(broker.port)
        created = client.request(CREATE_TOPICS, 7, topics=[
            {"name": "orders", "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}],
            timeout=5000)
        client.close()
        assert created.topics[0].error_code == ErrorCode.none
        yield broker


def group_id() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def join_body(group, member_id="", session_ms=10000, protocols=(("range", b"sub"),), protocol_type="consumer"):
    return {"group_id": group, "session_timeout": session_ms, "rebalance_timeout": 10000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": protocol_type,
            "protocols": [{"name": name, "metadata": metadata} for name, metadata in protocols]}


def joined_member(client, group):
    """JoinGroup v5 as librdkafka: MEMBER_ID_REQUIRED, then the real join; returns the answer."""
    required = client.request(JOIN_GROUP, 5, **join_body(group))
    assert required.error_code == ErrorCode.member_id_required and required.member_id
    return client.request(JOIN_GROUP, 5, **join_body(group, required.member_id))


def cg_heartbeat(client, group, member, epoch, owned=(), **fields):
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 30000 if epoch == 0 else -1,
            "subscribed_topic_names": ["orders"] if epoch == 0 else None, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": list(owned) if owned is not None else None, **fields}
    return client.request(CONSUMER_GROUP_HEARTBEAT, 1, **body)


def commit_body(group, member, epoch, partitions=((0, 5),), topic="orders"):
    return {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member, "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": index, "committed_offset": offset,
                                                       "committed_leader_epoch": -1, "committed_metadata": None}
                                                      for index, offset in partitions]}]}


def test_classic_join_sync_heartbeat_commit_and_their_errors(broker, raw_client):
    client, group = raw_client(broker), group_id()
    joined = joined_member(client, group)
    member, generation = joined.member_id, joined.generation_id
    assert (joined.error_code, joined.leader, joined.protocol_name) == (ErrorCode.none, member, "range")
    assert [entry.metadata for entry in joined.members] == [b"sub"]
    wrong = client.request(SYNC_GROUP, 5, group_id=group, generation_id=generation + 1, member_id=member,
                           group_instance_id=None, protocol_type="consumer", protocol_name="range", assignments=[])
    assert wrong.error_code == ErrorCode.illegal_generation
    synced = client.request(SYNC_GROUP, 3, group_id=group, generation_id=generation, member_id=member,
                            group_instance_id=None, assignments=[{"member_id": member, "assignment": b"a0"}])
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"a0")
    beat = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None}
    assert client.request(HEARTBEAT, 3, **beat).error_code == ErrorCode.none
    assert client.request(HEARTBEAT, 3, **{**beat, "generation_id": generation + 1}).error_code \
        == ErrorCode.illegal_generation
    assert client.request(HEARTBEAT, 3, **{**beat, "member_id": "ghost"}).error_code == ErrorCode.unknown_member_id
    committed = client.request(OFFSET_COMMIT, 8, **commit_body(group, member, generation + 1))
    assert committed.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
    committed = client.request(OFFSET_COMMIT, 9, **commit_body(group, member, generation, ((0, 5), (7, 1))))
    assert [part.error_code for part in committed.topics[0].partitions] \
        == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    fetched = client.request(OFFSET_FETCH, 7, group_id=group, topics=[{"name": "orders", "partition_indexes": [0, 1]}],
                             require_stable=True)
    assert [(part.committed_offset, part.error_code) for part in fetched.topics[0].partitions] \
        == [(5, ErrorCode.none), (-1, ErrorCode.none)]
    left = client.request(LEAVE_GROUP, 0, group_id=group, member_id=member)
    assert left.error_code == ErrorCode.none
    assert client.request(LEAVE_GROUP, 0, group_id=group, member_id=member).error_code == ErrorCode.unknown_member_id


def test_a_joining_member_puts_the_group_in_rebalance(broker, raw_client):
    first, second, group = raw_client(broker), raw_client(broker), group_id()
    joined = joined_member(first, group)
    first.request(SYNC_GROUP, 3, group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
                  group_instance_id=None, assignments=[])
    required = second.request(JOIN_GROUP, 5, **join_body(group))
    second.send(second.encode(JOIN_GROUP, 5, **join_body(group, required.member_id)))  # parked until first rejoins
    beat = first.request(HEARTBEAT, 3, group_id=group, generation_id=joined.generation_id,
                         member_id=joined.member_id, group_instance_id=None)
    assert beat.error_code == ErrorCode.rebalance_in_progress
    rejoined = first.request(JOIN_GROUP, 5, **join_body(group, joined.member_id))
    parked = second.read_response(JOIN_GROUP, 5)
    assert rejoined.generation_id == parked.generation_id == joined.generation_id + 1
    assert rejoined.error_code == parked.error_code == ErrorCode.none


def test_classic_requests_that_are_refused_before_the_group_is_looked_at(broker, raw_client):
    client = raw_client(broker)
    assert client.request(JOIN_GROUP, 5, **join_body("")).error_code == ErrorCode.invalid_group_id
    assert client.request(JOIN_GROUP, 5, **join_body(group_id(), session_ms=10)).error_code \
        == ErrorCode.invalid_session_timeout
    assert client.request(JOIN_GROUP, 5, **join_body(group_id(), "not-a-member")).error_code \
        == ErrorCode.unknown_member_id


def test_kip848_heartbeats_epochs_and_their_errors(broker, raw_client):
    client, group, member = raw_client(broker), group_id(), uuid.uuid4().hex[:22]
    joined = cg_heartbeat(client, group, member, 0)
    assert (joined.error_code, joined.member_epoch, joined.heartbeat_interval.total_seconds()) == (ErrorCode.none, 1, 0.5)
    assignment = [(entry.topic_id, sorted(entry.partitions)) for entry in joined.assignment.topic_partitions]
    assert assignment == [(topic_id_of("orders"), [0, 1])]
    owned = [{"topic_id": topic_id_of("orders"), "partitions": [0, 1]}]
    assert cg_heartbeat(client, group, member, 1, owned).error_code == ErrorCode.none
    assert cg_heartbeat(client, group, member, 5, owned).error_code == ErrorCode.fenced_member_epoch
    assert cg_heartbeat(client, group, "ghost", 1, owned).error_code == ErrorCode.unknown_member_id
    refused = cg_heartbeat(client, group, member, 0, server_assignor="cooperative-sticky")
    assert refused.error_code == ErrorCode.unsupported_assignor and "uniform" in refused.error_message
    assert cg_heartbeat(client, group, member, 0, owned).error_code == ErrorCode.invalid_request
    stale = client.request(OFFSET_COMMIT, 9, **commit_body(group, member, 7))
    assert stale.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
    old = client.request(OFFSET_COMMIT, 8, **commit_body(group, member, 1))
    assert old.topics[0].partitions[0].error_code == ErrorCode.unsupported_version
    fetched = client.request(OFFSET_FETCH, 9, groups=[{"group_id": group, "member_id": member, "member_epoch": 4,
                                                        "topics": None}], require_stable=True)
    assert fetched.groups[0].error_code == ErrorCode.stale_member_epoch
    described = client.request(CONSUMER_GROUP_DESCRIBE, 1, group_ids=[group, "none"], include_authorized_operations=False)
    assert described.groups[0].group_state == "Stable" and described.groups[0].members[0].member_id == member
    assert described.groups[0].assignor_name == "uniform"
    assert described.groups[1].error_code == ErrorCode.group_id_not_found
    left = cg_heartbeat(client, group, member, -1, None)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)


def test_group_ids_do_not_cross_group_types(broker, raw_client):
    client, kip848, share = raw_client(broker), group_id(), group_id()
    cg_heartbeat(client, kip848, uuid.uuid4().hex[:22], 0)
    shared = client.request(SHARE_GROUP_HEARTBEAT, 1, group_id=kip848, member_id=uuid.uuid4().hex[:22], member_epoch=0,
                            rack_id=None, subscribed_topic_names=["orders"])
    assert shared.error_code == ErrorCode.group_id_not_found
    client.request(SHARE_GROUP_HEARTBEAT, 1, group_id=share, member_id=uuid.uuid4().hex[:22], member_epoch=0,
                   rack_id=None, subscribed_topic_names=["orders"])
    assert cg_heartbeat(client, share, uuid.uuid4().hex[:22], 0).error_code == ErrorCode.group_id_not_found
    assert client.request(JOIN_GROUP, 5, **join_body(share)).error_code == ErrorCode.inconsistent_group_protocol
    assert client.request(JOIN_GROUP, 5, **join_body(kip848)).error_code == ErrorCode.inconsistent_group_protocol
    committed = client.request(OFFSET_COMMIT, 9, **commit_body(share, "", -1))
    assert committed.topics[0].partitions[0].error_code == ErrorCode.group_id_not_found
    listed = client.request(LIST_GROUPS, 5, states_filter=[], types_filter=["consumer", "share"])
    types = {group.group_id: group.group_type for group in listed.groups}
    assert types[kip848] == "consumer" and types[share] == "share"


def test_offsets_by_topic_id_the_admin_apis_and_offset_delete(broker, raw_client):
    client, group = raw_client(broker), group_id()
    by_id = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
             "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 1, "committed_offset": 9,
                                                               "committed_leader_epoch": 0, "committed_metadata": "m"}]}
                        for topic_id in (topic_id_of("orders"), uuid.uuid4())]}
    committed = client.request(OFFSET_COMMIT, 10, **by_id)
    assert [topic.partitions[0].error_code for topic in committed.topics] \
        == [ErrorCode.none, ErrorCode.unknown_topic_id]
    fetched = client.request(OFFSET_FETCH, 10, groups=[{"group_id": group, "member_id": None, "member_epoch": -1,
                                                         "topics": None}], require_stable=False)
    partition = fetched.groups[0].topics[0].partitions[0]
    assert (fetched.groups[0].topics[0].topic_id, partition.committed_offset, partition.metadata) \
        == (topic_id_of("orders"), 9, "m")
    old = client.request(OFFSET_FETCH, 1, group_id=group, topics=[{"name": "orders", "partition_indexes": [1]}])
    assert old.topics[0].partitions[0].committed_offset == 9
    described = client.request(DESCRIBE_GROUPS, 5, groups=[group, "none"], include_authorized_operations=False)
    assert [entry.group_state for entry in described.groups] == ["Empty", "Dead"]
    assert client.request(DESCRIBE_GROUPS, 6, groups=["none"], include_authorized_operations=False) \
        .groups[0].error_code == ErrorCode.group_id_not_found
    deleted = client.request(OFFSET_DELETE, 0, group_id=group,
                             topics=[{"name": "orders", "partitions": [{"partition_index": 1}]}])
    assert deleted.error_code == ErrorCode.none and deleted.topics[0].partitions[0].error_code == ErrorCode.none
    assert client.request(OFFSET_DELETE, 0, group_id=group, topics=[]).error_code == ErrorCode.group_id_not_found


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(broker, raw_client):
    client, group = raw_client(broker), group_id()
    slow, fast = uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]
    everything = [{"topic_id": topic_id_of("orders"), "partitions": [0, 1]}]
    cg_heartbeat(client, group, slow, 0, rebalance_timeout=1000)
    assert cg_heartbeat(client, group, fast, 0).assignment.topic_partitions == ()  # both still the slow one's
    asked = cg_heartbeat(client, group, slow, 1, everything)
    assert asked.member_epoch == 1 and len(asked.assignment.topic_partitions[0].partitions) == 1  # revoke one
    deadline = time.monotonic() + 30
    while (answer := cg_heartbeat(client, group, slow, 1, everything)).error_code == ErrorCode.none:
        assert time.monotonic() < deadline, "the member was never fenced"
        time.sleep(0.2)  # keeps heartbeating, never revokes: fenced 1000 ms after the revocation was asked
    assert answer.error_code == ErrorCode.unknown_member_id
    taken = cg_heartbeat(client, group, fast, 2, [])
    assert [sorted(entry.partitions) for entry in taken.assignment.topic_partitions] == [[0, 1]]
