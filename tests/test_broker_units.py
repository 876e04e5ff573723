"""The broker's parts on their own: partition log (durability, torn tail, idempotence), membership, codec."""

from __future__ import annotations

import datetime
import struct
from types import SimpleNamespace

import harness  # tests/harness.py
import pytest

from kipcheck.impl.broker.config import BrokerConfig, split_properties
from kipcheck.impl.broker.groups import Member, ShareGroups, target_assignment
from kipcheck.impl.broker.handlers.share import acknowledgement_batches
from kipcheck.impl.broker.log import PartitionLog, ProducerEpochError, SequenceError
from kipcheck.impl.broker.metadata import Topics, TopicError, topic_id_of
from kipcheck.impl.share.config import ShareConfig
from kipcheck.impl.wire.batches import InvalidBatch
from kipcheck.impl.wire.codec import FrameError, UnsupportedApi, build, decode_request, encode_response, response_class

batch = harness.record_batch


# -- partition log -----------------------------------------------------------------------------


def test_log_assigns_offsets_and_keeps_batches_byte_for_byte(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    first, second = batch(3), batch(2)
    assert log.append(first) == 0
    assert log.append(second) == 3
    assert log.end_offset == 5 and log.batch_ranges() == [(0, 2), (3, 4)]
    stored = log.read(3, 1 << 20)
    assert struct.unpack_from(">q", stored)[0] == 3 and stored[8:] == second[8:]
    assert log.read(0, 1) == log.read_range(0, 2)  # at least one whole batch, however small max_bytes is
    assert log.read_range(2, 3) == log.read(0, 1 << 20)


def test_log_survives_reopen_and_truncates_a_torn_tail(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    log.append(batch(4))
    log.append(batch(4))
    log.close()
    segment = next((tmp_path / "t-0").glob("*.log"))
    whole = segment.read_bytes()
    with open(segment, "ab") as file:
        file.write(batch(3)[:20])  # a crash in the middle of a write
    reopened = PartitionLog.open(tmp_path / "t-0")
    assert reopened.end_offset == 8 and segment.read_bytes() == whole
    assert reopened.append(batch(1)) == 8


def test_log_truncates_at_a_corrupt_batch(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    log.append(batch(2))
    log.append(batch(2))
    log.close()
    segment = next((tmp_path / "t-0").glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # the second batch's CRC no longer matches
    segment.write_bytes(bytes(data))
    assert PartitionLog.open(tmp_path / "t-0").end_offset == 2


def test_log_rolls_segments_and_replays_them(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", segment_bytes=200)
    for _ in range(5):
        log.append(batch(3))
    log.close()
    assert len(list((tmp_path / "t-0").glob("*.log"))) > 1
    reopened = PartitionLog.open(tmp_path / "t-0", segment_bytes=200)
    assert reopened.end_offset == 15 and len(reopened.read(0, 1 << 20)) == len(batch(3)) * 5


def test_log_refuses_bad_batches_without_writing(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 1
    for bad in (bytes(corrupt), b"", b"\x00" * 30, batch(2)[:-3]):
        with pytest.raises(InvalidBatch):
            log.append(bad)
    assert log.end_offset == 0


def test_idempotent_producer_duplicates_and_gaps(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    assert log.append(batch(3, producer_id=7, sequence=0, epoch=0)) == 0
    assert log.append(batch(3, producer_id=7, sequence=0, epoch=0)) == 0  # a retry: same offset, nothing written
    assert log.end_offset == 3
    with pytest.raises(SequenceError):
        log.append(batch(1, producer_id=7, sequence=9, epoch=0))
    assert log.append(batch(2, producer_id=7, sequence=3, epoch=0)) == 3
    log.close()
    assert PartitionLog.open(tmp_path / "t-0").append(batch(2, producer_id=7, sequence=3, epoch=0)) == 3


def test_a_retry_of_any_of_five_requests_in_flight_is_a_duplicate_even_after_kill_9(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    for number in range(6):      # a producer's requests in flight when the broker died: all were written
        assert log.append(batch(2, producer_id=7, sequence=2 * number, epoch=0)) == 2 * number
    reopened = PartitionLog.open(tmp_path / "t-0")    # no close: the state comes back from the log alone
    for number in range(1, 6):   # the producer retries them in order: each answered with its first offset
        assert reopened.append(batch(2, producer_id=7, sequence=2 * number, epoch=0)) == 2 * number
    with pytest.raises(SequenceError):   # older than the five Kafka keeps
        reopened.append(batch(2, producer_id=7, sequence=0, epoch=0))
    assert reopened.end_offset == 12 and reopened.append(batch(1, producer_id=7, sequence=12, epoch=0)) == 12
    (tmp_path / "w-0").mkdir()   # a long-lived producer's log, its last batch just before the wrap
    (tmp_path / "w-0" / f"{0:020d}.log").write_bytes(batch(2, producer_id=8, sequence=(1 << 31) - 2, epoch=0))
    wrapped = PartitionLog.open(tmp_path / "w-0")
    assert wrapped.append(batch(1, producer_id=8, sequence=0, epoch=0)) == 2   # sequences wrap after 2^31 - 1


def test_a_new_producer_epoch_starts_at_sequence_0_and_an_older_epoch_is_refused(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0")
    log.append(batch(3, producer_id=7, sequence=0, epoch=0))
    for reopened in (log, PartitionLog.open(tmp_path / "t-0")):   # the epoch comes back from the log alone
        with pytest.raises(SequenceError):     # epoch 1's batches before sequence 5 were never stored
            reopened.append(batch(2, producer_id=7, sequence=5, epoch=1))
        assert reopened.end_offset == 3
    assert log.append(batch(2, producer_id=7, sequence=0, epoch=1)) == 3
    assert log.append(batch(2, producer_id=7, sequence=0, epoch=1)) == 3   # a retry in the new epoch
    with pytest.raises(ProducerEpochError):    # Kafka's INVALID_PRODUCER_EPOCH: the producer moved on
        log.append(batch(1, producer_id=7, sequence=3, epoch=0))
    with pytest.raises(SequenceError):         # a producer the log holds nothing of: its sequence 0 was lost
        log.append(batch(1, producer_id=8, sequence=40, epoch=0))
    assert log.append(batch(1, producer_id=8, sequence=0, epoch=0)) == 5


# -- topics and membership ---------------------------------------------------------------------


def test_topic_ids_are_stable_and_topics_persist(tmp_path):
    topics = Topics(tmp_path)
    created = topics.create("orders", 3)
    assert created.topic_id == topic_id_of("orders") == Topics(tmp_path).get("orders").topic_id
    assert Topics(tmp_path).get_by_id(created.topic_id).partitions == 3
    with pytest.raises(TopicError) as raised:
        topics.create("orders", 1)
    assert raised.value.error == "TOPIC_ALREADY_EXISTS"
    for name, partitions in (("bad name", 1), ("ok", 0)):
        with pytest.raises(TopicError):
            topics.create(name, partitions)


def members(*names: str, topic: str = "t") -> dict:
    return {name: Member(name, 1, 0, (topic,), 0) for name in names}


def test_assignment_round_robin_and_sharing():
    assert target_assignment(members("a", "b"), lambda topic: 3) == {"a": {"t": (0, 2)}, "b": {"t": (1,)}}
    shared = target_assignment(members("a", "b", "c"), lambda topic: 2)
    assert shared == {"a": {"t": (0,)}, "b": {"t": (1,)}, "c": {"t": (0,)}}
    assert target_assignment(members("a"), lambda topic: 0) == {"a": {}}


def test_heartbeat_join_rebalance_fencing_leave_and_expiry():
    groups = ShareGroups(lambda topic: 2 if topic == "t" else 0, session_timeout_ms=1000)
    first = groups.heartbeat("g", "a", 0, ("t",), at_ms=0)
    assert first.error == "NONE" and first.assignment == {"t": (0, 1)}
    second = groups.heartbeat("g", "b", 0, ("t",), at_ms=10)
    assert second.assignment == {"t": (1,)}
    moved = groups.heartbeat("g", "a", first.member_epoch, None, at_ms=20)
    assert moved.member_epoch > first.member_epoch and moved.assignment == {"t": (0,)}
    assert groups.heartbeat("g", "a", first.member_epoch, None, at_ms=30).error == "NONE"  # previous epoch
    assert groups.heartbeat("g", "a", moved.member_epoch + 3, None, at_ms=40).error == "FENCED_MEMBER_EPOCH"
    assert groups.heartbeat("g", "zz", 5, None, at_ms=40).error == "UNKNOWN_MEMBER_ID"
    assert groups.heartbeat("g", "", 0, ("t",), at_ms=40).error == "INVALID_REQUEST"
    assert groups.heartbeat("g", "b", -1, None, at_ms=50).member_epoch == -1
    assert groups.heartbeat("g", "a", moved.member_epoch, None, at_ms=60).assignment == {"t": (0, 1)}
    assert groups.expire(at_ms=5000) == [("g", "a")]
    assert groups.heartbeat("g", "a", 9, None, at_ms=5001).error == "UNKNOWN_MEMBER_ID"


def test_a_heartbeat_flood_of_many_groups_costs_each_heartbeat_and_tick_no_more():
    """Tens of thousands of share groups (one ShareGroupHeartbeat each): expiry looks at the members that are
    due, not at every group. Before: every heartbeat and every 50 ms timer tick scanned all groups (a flood of
    20,000 groups took 77 s, slower with each group). The work is counted, not timed: the members looked at."""
    groups = ShareGroups(lambda topic: 1, session_timeout_ms=1000)
    for number in range(20_000):
        groups.heartbeat(f"g{number}", "m", 0, ("t",), at_ms=number % 500)
    looked_at = []
    for group in groups.groups.values():
        group.members = CountingDict(group.members, looked_at)
    groups.heartbeat("another", "m", 0, ("t",), at_ms=600)
    assert groups.expire(at_ms=700) == [] and len(looked_at) < 10
    due = [f"g{number}" for number in range(20_000) if number % 500 <= 200]  # deadlines up to 1200
    assert sorted(groups.expire(at_ms=1200)) == sorted((group_id, "m") for group_id in due)
    assert len(looked_at) < 2 * len(due) + 10


class CountingDict(dict):
    """A members dict that records every member looked up or listed."""

    def __init__(self, members: dict, looked_at: list):
        super().__init__(members)
        self.looked_at = looked_at

    def get(self, key, default=None):
        self.looked_at.append(key)
        return super().get(key, default)

    def items(self):
        self.looked_at.extend(self)
        return super().items()


# -- wire pieces -------------------------------------------------------------------------------


def wire_batch(first: int, last: int, types: list[int]):
    return SimpleNamespace(first_offset=first, last_offset=last, acknowledge_types=types)


def test_acknowledgement_batches_from_the_wire():
    assert acknowledgement_batches([wire_batch(0, 1, [2]), wire_batch(2, 2, [3]), wire_batch(3, 5, [1])], 1) == [
        (0, 1, "release"), (2, 2, "reject"), (3, 5, "accept")]
    assert acknowledgement_batches([wire_batch(10, 13, [1, 1, 2, 0])], 1) == [
        (10, 11, "accept"), (12, 12, "release"), (13, 13, "gap")]
    assert acknowledgement_batches([wire_batch(0, 3, [1, 2])], 1) is None
    assert acknowledgement_batches([wire_batch(0, 0, [])], 1) is None
    assert acknowledgement_batches([wire_batch(0, 0, [9])], 2) is None
    # RENEW (4) exists from version 2 on (KIP-1222).
    assert acknowledgement_batches([wire_batch(0, 1, [4])], 1) is None
    assert acknowledgement_batches([wire_batch(0, 2, [4, 4, 1])], 2) == [(0, 1, "renew"), (2, 2, "accept")]


def test_build_converts_plain_values_and_the_response_round_trips():
    from kio.serial import entity_reader

    body = build(response_class(78, 1), throttle_time=0, error_code="NONE", acquisition_lock_timeout=30000,
                 node_endpoints=[], responses=[{"topic_id": topic_id_of("t"), "partitions": [{
                     "partition_index": 0, "error_code": 0, "acknowledge_error_code": 0,
                     "current_leader": {"leader_id": 0, "leader_epoch": 0}, "records": b"",
                     "acquired_records": [{"first_offset": 0, "last_offset": 4, "delivery_count": 1}]}]}],
                 not_a_field_of_v1="dropped")
    frame = encode_response(78, 1, 7, body)
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 7)
    response = response_class(78, 1)
    _, header_size = entity_reader(response.__header_schema__)(frame, 4)
    decoded, _ = entity_reader(response)(frame, 4 + header_size)
    assert decoded == body and decoded.acquisition_lock_timeout == datetime.timedelta(seconds=30)
    with pytest.raises(TypeError):
        build(response_class(78, 1), throttle_time=0)


def test_decode_request_refuses_garbage_and_unsupported_versions():
    with pytest.raises(FrameError):
        decode_request(b"\x00\x03", {3: (1, 12)})
    with pytest.raises(UnsupportedApi):
        decode_request(struct.pack(">hhi", 3, 13, 1) + b"\x00\x00", {3: (1, 12)})
    with pytest.raises(FrameError):
        decode_request(struct.pack(">hhi", 3, 12, 1) + b"\xff" * 5, {3: (1, 12)})


def test_settings_split_between_broker_and_share_config():
    config, share = split_properties({"num.partitions": "4", "group.share.delivery.count.limit": "3"})
    assert config == BrokerConfig(default_partitions=4) and share == ShareConfig(delivery_count_limit=3)
    for bad in ({"no.such.setting": "1"}, {"num.partitions": "x"}, {"advertised.listeners": "localhost"},
                {"auto.create.topics.enable": "maybe"}, {"num.partitions": "0"}):
        with pytest.raises(ValueError):
            split_properties(bad)


def test_a_member_moves_to_its_target_only_when_it_heartbeats_and_every_membership_change_moves_the_group_epoch():
    """As Kafka 4.2's share groups (ShareGroupAssignmentBuilder, shareGroupFenceMember), found by comparing the
    two brokers' ShareGroupDescribe after a probe: a member that does not heartbeat keeps the epoch and assignment
    it was last told; a join, a leave and an expiry each move the group epoch, and the target assignment follows
    it at the next heartbeat of any member."""
    groups = ShareGroups(lambda topic: 2 if topic == "t" else 0, session_timeout_ms=1000)
    alone = groups.heartbeat("g", "a", 0, ("t",), at_ms=0)
    assert (alone.member_epoch, alone.assignment) == (1, {"t": (0, 1)})
    assert groups.heartbeat("g", "b", 0, ("t",), at_ms=10).member_epoch == 2
    group = groups.groups["g"]
    a, b = group.members["a"], group.members["b"]
    assert (a.epoch, a.assignment, b.epoch, b.assignment) == (1, {"t": (0, 1)}, 2, {"t": (1,)}), "a has not heard"
    assert (group.epoch, group.assignment_epoch) == (2, 2)
    assert groups.heartbeat("g", "b", -1, None, at_ms=20).member_epoch == -1
    assert (group.epoch, group.assignment_epoch) == (3, 2), "a leave moves the group epoch, not the target's"
    moved = groups.heartbeat("g", "a", 1, None, at_ms=30)
    assert (moved.member_epoch, moved.assignment, group.assignment_epoch) == (3, {"t": (0, 1)}, 3)
    assert groups.expire(at_ms=5000) == [("g", "a")] and group.epoch == 4
