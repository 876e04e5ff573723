"""KIP-848 consumer groups in-process, on a virtual clock: epochs, revocation before assignment, timeouts, errors.

Each test drives impl/groups' GroupCoordinator as the broker does, with the
heartbeats a real member would send, and checks Kafka 4.2's answers
(GroupMetadataManager.consumerGroupHeartbeat, CurrentAssignmentBuilder).
"""

from __future__ import annotations

import pytest

from kipcheck.impl.groups.classic import JoinRequest
from kipcheck.impl.groups.config import GroupConfig
from kipcheck.impl.groups.consumer import HeartbeatRequest
from kipcheck.impl.groups.consumer_group import STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS
from kipcheck.impl.groups.coordinator import GroupCoordinator, OffsetCommit
from kipcheck.impl.groups.offsets import CommittedOffset

SESSION_MS, REBALANCE_MS = 6000, 4000


@pytest.fixture
def coordinator(tmp_path):
    topics = {"t": 4, "u": 2}
    shares: set[str] = set()
    coordinator = GroupCoordinator(tmp_path, GroupConfig(consumer_session_timeout_ms=SESSION_MS),
                                   lambda topic: topics.get(topic, 0), lambda: sorted(topics),
                                   lambda group_id: group_id in shares, fsync=False)
    coordinator.topics, coordinator.shares = topics, shares
    yield coordinator
    coordinator.close()


def join(coordinator, member_id, at_ms=0, topics=("t",), group="g", **fields):
    return coordinator.consumer_heartbeat(HeartbeatRequest(
        group, member_id, 0, rebalance_timeout_ms=REBALANCE_MS, subscribed_names=topics, owned={}, **fields), at_ms)


def beat(coordinator, member_id, epoch, owned, at_ms=0, group="g", **fields):
    return coordinator.consumer_heartbeat(HeartbeatRequest(group, member_id, epoch, owned=owned, **fields), at_ms)


def member(coordinator, member_id, group="g"):
    return coordinator.consumer.groups[group].members[member_id]


def test_a_lone_member_gets_every_partition_at_epoch_one(coordinator):
    answer = join(coordinator, "a")
    assert (answer.error, answer.member_epoch, answer.assignment) == ("NONE", 1, {"t": frozenset(range(4))})
    again = beat(coordinator, "a", 1, {"t": frozenset(range(4))}, at_ms=100)
    assert (again.error, again.member_epoch, again.assignment) == ("NONE", 1, None)  # unchanged: not resent


def test_a_partition_moves_only_after_its_owner_acknowledges_the_revocation(coordinator):
    join(coordinator, "a")
    b = join(coordinator, "b", at_ms=10)
    assert b.member_epoch == 2 and b.assignment == {}  # b's target partitions are still a's: UNRELEASED
    assert member(coordinator, "b").state == UNRELEASED_PARTITIONS
    revoke = beat(coordinator, "a", 1, {"t": frozenset(range(4))}, at_ms=20)
    assert revoke.member_epoch == 1 and len(revoke.assignment["t"]) == 2  # a keeps its epoch, told to revoke two
    assert member(coordinator, "a").state == UNREVOKED_PARTITIONS
    moving = frozenset(range(4)) - revoke.assignment["t"]
    assert beat(coordinator, "b", 2, {}, at_ms=30).assignment is None  # a has not released them yet
    acked = beat(coordinator, "a", 1, {"t": revoke.assignment["t"]}, at_ms=40)
    assert (acked.member_epoch, acked.assignment) == (2, None)
    assert member(coordinator, "a").state == STABLE
    assert beat(coordinator, "b", 2, {}, at_ms=50).assignment == {"t": moving}
    assert member(coordinator, "b").state == STABLE and coordinator.consumer.groups["g"].state() == "Stable"


def test_a_heartbeat_without_owned_partitions_counts_as_still_owning_them(coordinator):
    join(coordinator, "a")
    join(coordinator, "b")
    beat(coordinator, "a", 1, {"t": frozenset(range(4))})
    assert beat(coordinator, "a", 1, None).member_epoch == 1
    assert member(coordinator, "a").state == UNREVOKED_PARTITIONS


def test_the_rebalance_timeout_fences_a_member_that_does_not_revoke_and_frees_all_its_partitions(coordinator):
    join(coordinator, "a")
    join(coordinator, "b", at_ms=10)
    beat(coordinator, "a", 1, {"t": frozenset(range(4))}, at_ms=20)  # revocation requested at 20
    for at_ms in range(1000, REBALANCE_MS + 20, 1000):  # a keeps heartbeating, still owning everything
        beat(coordinator, "a", 1, {"t": frozenset(range(4))}, at_ms=at_ms)
        beat(coordinator, "b", 2, {}, at_ms=at_ms)
    assert coordinator.tick(REBALANCE_MS + 19) == []
    events = coordinator.tick(REBALANCE_MS + 20)
    assert any("rebalance timeout" in event and "lost" in event for event in events)
    assert "a" not in coordinator.consumer.groups["g"].members
    assert beat(coordinator, "a", 1, {"t": frozenset(range(4))}, at_ms=REBALANCE_MS + 30).error == "UNKNOWN_MEMBER_ID"
    b = beat(coordinator, "b", 2, {}, at_ms=REBALANCE_MS + 40)
    assert b.assignment == {"t": frozenset(range(4))} and b.member_epoch == 3


def test_the_session_timeout_fences_a_silent_member(coordinator):
    join(coordinator, "a")
    join(coordinator, "b", at_ms=1000)
    assert coordinator.tick(SESSION_MS - 1) == []
    assert any("session expired" in event for event in coordinator.tick(SESSION_MS))
    assert set(coordinator.consumer.groups["g"].members) == {"b"}


def test_member_epochs_fenced_stale_and_the_previous_epoch_of_a_lost_answer(coordinator):
    join(coordinator, "a")
    join(coordinator, "b")
    beat(coordinator, "a", 1, {"t": frozenset(range(4))})
    kept = member(coordinator, "a").assigned
    beat(coordinator, "a", 1, kept)  # acknowledges: a moves to epoch 2
    assert member(coordinator, "a").epoch == 2
    assert beat(coordinator, "a", 3, kept).error == "FENCED_MEMBER_EPOCH"
    assert beat(coordinator, "a", 1, kept).error == "NONE"  # previous epoch, owns no more than its assignment
    assert beat(coordinator, "a", 1, {"t": frozenset(range(4))}).error == "FENCED_MEMBER_EPOCH"
    assert beat(coordinator, "nobody", 2, {}).error == "UNKNOWN_MEMBER_ID"


def test_invalid_requests_and_unsupported_assignors_change_nothing(coordinator):
    invalid = [HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, subscribed_names=("t",), owned={}),
               HeartbeatRequest("", "a", 0, rebalance_timeout_ms=1, subscribed_names=("t",), owned={}),
               HeartbeatRequest("g", "a", 0, subscribed_names=("t",), owned={}),
               HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1, subscribed_names=("t",), owned={"t": frozenset({0})}),
               HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1, owned={}),
               HeartbeatRequest("g", "a", -2),
               HeartbeatRequest("g", "a", -3)]
    for request in invalid:
        assert coordinator.consumer_heartbeat(request, 0).error == "INVALID_REQUEST", request
    bad = join(coordinator, "a", server_assignor="sticky")
    assert bad.error == "UNSUPPORTED_ASSIGNOR" and "uniform, range" in bad.message
    assert join(coordinator, "a", topics=None, subscribed_regex="(").error == "INVALID_REGULAR_EXPRESSION"
    assert coordinator.consumer.groups == {}


def test_the_range_assignor_serves_members_that_ask_for_it(coordinator):
    assert join(coordinator, "a", server_assignor="range").assignment == {"t": frozenset(range(4))}
    join(coordinator, "b", server_assignor="range")
    beat(coordinator, "a", 1, {"t": frozenset(range(4))})
    assert member(coordinator, "a").assigned == {"t": frozenset({0, 1})}  # range: a (first by id) keeps 0-1
    assert coordinator.consumer.assignor_name(coordinator.consumer.groups["g"].members.values()) == "range"


def test_a_subscription_change_bumps_the_group_epoch_and_revokes_the_dropped_topic(coordinator):
    join(coordinator, "a", topics=("t", "u"))
    assert member(coordinator, "a").assigned == {"t": frozenset(range(4)), "u": frozenset({0, 1})}
    answer = beat(coordinator, "a", 1, {"t": frozenset(range(4)), "u": frozenset({0, 1})}, subscribed_names=("t",))
    assert answer.assignment == {"t": frozenset(range(4))}
    assert coordinator.consumer.groups["g"].epoch == 2


def test_a_regex_subscription_follows_new_topics(coordinator):
    assert join(coordinator, "a", topics=None, subscribed_regex="t|v").assignment == {"t": frozenset(range(4))}
    coordinator.topics["v"] = 1
    answer = beat(coordinator, "a", 1, {"t": frozenset(range(4))}, at_ms=100)
    assert answer.member_epoch == 2 and answer.assignment == {"t": frozenset(range(4)), "v": frozenset({0})}


def test_static_members_keep_their_partitions_across_a_temporary_leave(coordinator):
    join(coordinator, "a1", instance_id="i-a")
    join(coordinator, "b", at_ms=10)
    beat(coordinator, "a1", 1, {"t": frozenset(range(4))}, instance_id="i-a")
    held = member(coordinator, "a1").assigned
    assert beat(coordinator, "a1", 1, held, instance_id="i-a").member_epoch == 2
    assert beat(coordinator, "a1", -2, None, instance_id="i-a").member_epoch == -2
    assert join(coordinator, "a2", instance_id="i-a").error == "NONE"
    assert member(coordinator, "a2").assigned == held
    assert join(coordinator, "a3", instance_id="i-a").error == "UNRELEASED_INSTANCE_ID"
    assert beat(coordinator, "a1", 1, {}, instance_id="i-a").error == "FENCED_INSTANCE_ID"
    assert beat(coordinator, "x", 1, {}, instance_id="i-x").error == "UNKNOWN_MEMBER_ID"


def test_the_group_size_is_bounded(tmp_path):
    coordinator = GroupCoordinator(tmp_path, GroupConfig(consumer_max_size=1), lambda topic: 1, lambda: ["t"],
                                   lambda group_id: False, fsync=False)
    assert join(coordinator, "a").error == "NONE"
    assert join(coordinator, "b").error == "GROUP_MAX_SIZE_REACHED"
    coordinator.close()


def test_group_ids_are_unique_across_share_classic_and_consumer_groups(coordinator):
    coordinator.shares.add("shared")
    assert join(coordinator, "a", group="shared").error == "GROUP_ID_NOT_FOUND"
    join(coordinator, "a", group="kip848")
    assert coordinator.share_group_refused("kip848")
    classic = JoinRequest("kip848", "", None, "consumer", (("range", b""),), 6000, 6000)
    assert coordinator.join(classic, 0).answer.error == "INCONSISTENT_GROUP_PROTOCOL"
    assert coordinator.join(JoinRequest("shared", "", None, "consumer", (("range", b""),), 6000, 6000), 0) \
        .answer.error == "INCONSISTENT_GROUP_PROTOCOL"
    beat(coordinator, "a", -1, None, group="kip848")
    assert coordinator.group_type("kip848") is None  # empty and without offsets: forgotten
    assert coordinator.join(classic, 0).answer.error == "MEMBER_ID_REQUIRED"
    assert join(coordinator, "b", group="kip848").error == "GROUP_ID_NOT_FOUND"  # a classic group with a member


def test_offset_commits_are_checked_against_the_member_epoch(coordinator):
    join(coordinator, "a")
    offsets = {("t", 0): CommittedOffset(5)}
    assert coordinator.commit(OffsetCommit("g", "a", None, 1, 9, offsets), 0) == {("t", 0): "NONE"}
    assert coordinator.commit(OffsetCommit("g", "a", None, 7, 9, offsets), 0) == {("t", 0): "STALE_MEMBER_EPOCH"}
    assert coordinator.commit(OffsetCommit("g", "a", None, 1, 8, offsets), 0) == {("t", 0): "UNSUPPORTED_VERSION"}
    assert coordinator.commit(OffsetCommit("g", "z", None, 1, 9, offsets), 0) == {("t", 0): "UNKNOWN_MEMBER_ID"}
    assert coordinator.fetch("g", "a", 7, [("t", 0)])[0] == "STALE_MEMBER_EPOCH"
    assert coordinator.fetch("g", "a", 1, [("t", 0), ("t", 1)]) == ("NONE", {("t", 0): CommittedOffset(5),
                                                                             ("t", 1): None})
    beat(coordinator, "a", -1, None)
    assert coordinator.commit(OffsetCommit("g", "", None, -1, 9, offsets), 0) == {("t", 0): "NONE"}  # empty group
