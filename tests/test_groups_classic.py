"""The classic group protocol in-process, on a virtual clock (Kafka 4.2's GroupMetadataManager classic paths).

Members join as librdkafka does (JoinGroup v5: MEMBER_ID_REQUIRED first), the
leader syncs the assignment, and the timers (initial delay, rebalance
timeout, sync timeout, session timeout) fire on `tick`.
"""

from __future__ import annotations

import itertools

import pytest

from kipcheck.impl.groups.classic import JoinRequest
from kipcheck.impl.groups.classic_group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from kipcheck.impl.groups.config import GroupConfig
from kipcheck.impl.groups.coordinator import GroupCoordinator, OffsetCommit
from kipcheck.impl.groups.offsets import CommittedOffset

DELAY_MS, SESSION_MS, REBALANCE_MS = 100, 3000, 5000
JOINED_MS = 2 * DELAY_MS  # members joining during the initial delay extend it once
RANGE = (("range", b"range-metadata"), ("roundrobin", b"rr-metadata"))


@pytest.fixture
def coordinator(tmp_path):
    ids = itertools.count(1)
    coordinator = GroupCoordinator(tmp_path, GroupConfig(initial_rebalance_delay_ms=DELAY_MS, classic_max_size=3),
                                   lambda topic: 2, lambda: ["t"], lambda group_id: False, fsync=False,
                                   new_member_id=lambda prefix: f"{prefix}-{next(ids)}")
    yield coordinator
    coordinator.close()


def request(member_id="", protocols=RANGE, client="c", instance=None, protocol_type="consumer", version=5):
    return JoinRequest("g", member_id, instance, protocol_type, protocols, SESSION_MS, REBALANCE_MS, client,
                       "/127.0.0.1", requires_known_member_id=version >= 4, supports_skip_assignment=version >= 9)


def run_until(coordinator, end_ms, start_ms=0, step_ms=10):
    """Tick every step_ms, as the broker's timer does, so timers see the time they are due at."""
    for at_ms in range(start_ms, end_ms + 1, step_ms):
        coordinator.tick(at_ms)


def first_join(coordinator, client, at_ms=0, protocols=RANGE):
    """JoinGroup v5 twice, as librdkafka: the id comes back with MEMBER_ID_REQUIRED. Returns (id, Pending)."""
    required = coordinator.join(request(protocols=protocols, client=client), at_ms).answer
    assert required.error == "MEMBER_ID_REQUIRED" and required.member_id.startswith(client)
    return required.member_id, coordinator.join(request(required.member_id, protocols, client), at_ms)


def stable_group(coordinator, *clients):
    """Members joined and synced; returns {client: member id} and the generation."""
    joined = {client: first_join(coordinator, client) for client in clients}
    run_until(coordinator, JOINED_MS)
    answers = {client: pending.answer for client, (_, pending) in joined.items()}
    leader = next(answer for answer in answers.values() if answer.members)
    syncs = {client: coordinator.sync("g", answer.member_id, None, answer.generation_id, "consumer", "range",
                                      {member: member.encode() for member, _, _ in leader.members}, JOINED_MS)
             for client, answer in sorted(answers.items(), key=lambda item: item[1] is leader)}
    assert all(pending.answer.error == "NONE" for pending in syncs.values())
    return {client: answer.member_id for client, answer in answers.items()}, leader.generation_id


def test_first_join_waits_the_initial_delay_then_the_leader_gets_every_member(coordinator):
    a, pending_a = first_join(coordinator, "a")
    b, pending_b = first_join(coordinator, "b", at_ms=50)
    assert not pending_a.done and not pending_b.done
    run_until(coordinator, JOINED_MS - 10)
    assert not pending_a.done  # b arrived during the delay: it was extended once
    coordinator.tick(JOINED_MS)
    answers = {pending_a.answer.member_id: pending_a.answer, pending_b.answer.member_id: pending_b.answer}
    assert {answer.generation_id for answer in answers.values()} == {1}
    assert {answer.protocol_name for answer in answers.values()} == {"range"}
    assert answers[a].leader == answers[b].leader == a
    assert answers[a].members == ((a, None, b"range-metadata"), (b, None, b"range-metadata"))
    assert answers[b].members == ()


def test_the_leaders_assignment_reaches_every_member_through_sync(coordinator):
    a, pending_a = first_join(coordinator, "a")
    b, pending_b = first_join(coordinator, "b")
    run_until(coordinator, JOINED_MS)
    follower = coordinator.sync("g", b, None, 1, "consumer", "range", {}, JOINED_MS)
    assert not follower.done and coordinator.classic.groups["g"].state == COMPLETING_REBALANCE
    leader = coordinator.sync("g", a, None, 1, "consumer", "range", {a: b"for-a", b: b"for-b"}, JOINED_MS)
    assert (leader.answer.error, leader.answer.assignment, leader.answer.protocol_name) == ("NONE", b"for-a", "range")
    assert follower.answer.assignment == b"for-b"
    assert coordinator.classic.groups["g"].state == STABLE
    assert coordinator.heartbeat("g", b, None, 1, JOINED_MS) == "NONE"


def test_a_new_member_makes_the_others_rejoin_and_the_generation_advances(coordinator):
    members, generation = stable_group(coordinator, "a", "b")
    c, pending_c = first_join(coordinator, "c", at_ms=200)
    assert coordinator.heartbeat("g", members["a"], None, generation, 210) == "REBALANCE_IN_PROGRESS"
    assert coordinator.sync("g", members["a"], None, generation, None, None, {}, 210).answer.error \
        == "REBALANCE_IN_PROGRESS"
    rejoins = [coordinator.join(request(members[client], client=client), 220) for client in ("a", "b")]
    assert pending_c.answer.generation_id == generation + 1  # everyone rejoined: no need to wait for the timeout
    assert all(pending.answer.generation_id == generation + 1 for pending in rejoins)
    assert coordinator.heartbeat("g", members["a"], None, generation, 230) == "ILLEGAL_GENERATION"


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(coordinator):
    members, generation = stable_group(coordinator, "a", "b")
    coordinator.leave("g", [("nobody", None)], 200)
    c, pending_c = first_join(coordinator, "c", at_ms=200)
    for at_ms in range(1000, 200 + REBALANCE_MS, 1000):  # a keeps heartbeating but never rejoins
        coordinator.heartbeat("g", members["a"], None, generation, at_ms)
    rejoin_b = coordinator.join(request(members["b"], client="b"), 300)
    coordinator.tick(200 + REBALANCE_MS - 1)
    assert not rejoin_b.done
    coordinator.tick(200 + REBALANCE_MS)
    assert set(coordinator.classic.groups["g"].members) == {members["b"], c}
    assert rejoin_b.answer.generation_id == pending_c.answer.generation_id == generation + 1


def test_a_silent_member_expires_after_its_session_timeout(coordinator):
    members, generation = stable_group(coordinator, "a", "b")
    coordinator.heartbeat("g", members["b"], None, generation, 2000)
    coordinator.tick(JOINED_MS + SESSION_MS)  # a's session: it never heartbeated after its sync
    group = coordinator.classic.groups["g"]
    assert members["a"] not in group.members and group.state == PREPARING_REBALANCE
    assert coordinator.heartbeat("g", members["a"], None, generation, JOINED_MS + SESSION_MS) == "UNKNOWN_MEMBER_ID"


def test_members_that_never_sync_are_removed_at_the_rebalance_timeout(coordinator):
    a, pending_a = first_join(coordinator, "a")
    b, pending_b = first_join(coordinator, "b")
    run_until(coordinator, JOINED_MS)
    coordinator.sync("g", b, None, 1, None, None, {}, JOINED_MS)  # the leader (a) never syncs
    coordinator.tick(JOINED_MS + REBALANCE_MS)
    group = coordinator.classic.groups["g"]
    assert a not in group.members and group.state == PREPARING_REBALANCE


def test_errors_of_the_classic_protocol(coordinator):
    members, generation = stable_group(coordinator, "a", "b")
    a = members["a"]
    assert coordinator.heartbeat("g", a, None, generation + 5, 200) == "ILLEGAL_GENERATION"
    assert coordinator.heartbeat("g", "ghost", None, generation, 200) == "UNKNOWN_MEMBER_ID"
    assert coordinator.heartbeat("other", a, None, generation, 200) == "UNKNOWN_MEMBER_ID"
    assert coordinator.sync("g", a, None, generation + 1, None, None, {}, 200).answer.error == "ILLEGAL_GENERATION"
    assert coordinator.sync("g", a, None, generation, "consumer", "roundrobin", {}, 200).answer.error \
        == "INCONSISTENT_GROUP_PROTOCOL"
    assert coordinator.join(request(protocols=(("sticky", b""),), client="x"), 200).answer.error \
        == "INCONSISTENT_GROUP_PROTOCOL"
    assert coordinator.join(request(protocol_type="connect", client="x"), 200).answer.error \
        == "INCONSISTENT_GROUP_PROTOCOL"
    assert coordinator.join(request("unknown-id", client="x"), 200).answer.error == "UNKNOWN_MEMBER_ID"
    offsets = {("t", 0): CommittedOffset(1)}
    assert coordinator.commit(OffsetCommit("g", a, None, generation + 1, 9, offsets), 200)[("t", 0)] \
        == "ILLEGAL_GENERATION"
    assert coordinator.commit(OffsetCommit("g", "", None, -1, 9, offsets), 200)[("t", 0)] == "UNKNOWN_MEMBER_ID"
    assert coordinator.commit(OffsetCommit("g", a, None, generation, 9, offsets), 200)[("t", 0)] == "NONE"


def test_a_commit_during_completing_rebalance_is_refused_and_the_group_size_is_bounded(coordinator):
    a, _ = first_join(coordinator, "a")
    for client in "bc":
        first_join(coordinator, client)
    assert coordinator.join(request(client="d"), 0).answer.error == "GROUP_MAX_SIZE_REACHED"
    run_until(coordinator, JOINED_MS)
    commit = OffsetCommit("g", a, None, 1, 9, {("t", 0): CommittedOffset(1)})
    assert coordinator.commit(commit, JOINED_MS)[("t", 0)] == "REBALANCE_IN_PROGRESS"


def test_the_members_vote_for_the_protocol_they_all_support(coordinator):
    first_join(coordinator, "a", protocols=(("roundrobin", b""), ("range", b"")))
    _, pending = first_join(coordinator, "b", protocols=(("range", b""), ("roundrobin", b"")))
    _, last = first_join(coordinator, "c", protocols=(("range", b""),))
    run_until(coordinator, JOINED_MS)
    assert last.answer.protocol_name == "range"  # roundrobin is not supported by c


def test_leaving_rebalances_and_bad_leaves_are_answered_per_member(coordinator):
    members, generation = stable_group(coordinator, "a", "b")
    error, errors = coordinator.leave("g", [(members["a"], None), ("ghost", None), ("", "no-such-instance")], 300)
    assert (error, errors) == ("NONE", ["NONE", "UNKNOWN_MEMBER_ID", "UNKNOWN_MEMBER_ID"])
    assert coordinator.classic.groups["g"].state == PREPARING_REBALANCE
    assert coordinator.leave("nothing", [("x", None)], 300) == ("UNKNOWN_MEMBER_ID", [])
    coordinator.leave("g", [(members["b"], None)], 300)
    assert coordinator.group_type("g") is None  # empty without offsets: forgotten


def test_a_static_member_rejoining_a_stable_group_takes_its_place_without_a_rebalance(coordinator):
    joined = coordinator.join(request(client="s", instance="i1"), 0)  # no MEMBER_ID_REQUIRED for static members
    b, pending_b = first_join(coordinator, "b")
    run_until(coordinator, JOINED_MS)
    old = joined.answer.member_id
    assert joined.answer.leader == old  # the first member leads
    coordinator.sync("g", b, None, 1, None, None, {}, JOINED_MS)
    coordinator.sync("g", old, "i1", 1, None, None, {old: b"mine", b: b"yours"}, JOINED_MS)
    group = coordinator.classic.groups["g"]
    again = coordinator.join(request(client="s", instance="i1"), 500).answer
    assert again.error == "NONE" and again.generation_id == 1 and again.member_id != old
    assert again.skip_assignment is False  # JoinGroup v5 cannot skip: the leader gets no member list
    assert group.state == STABLE and group.members[again.member_id].assignment == b"mine"
    assert coordinator.heartbeat("g", old, "i1", 1, 600) == "FENCED_INSTANCE_ID"
    assert coordinator.heartbeat("g", again.member_id, "i1", 1, 600) == "NONE"
    assert coordinator.sync("g", again.member_id, "i1", 1, None, None, {}, 600).answer.assignment == b"mine"


def test_an_empty_group_with_offsets_stays_a_classic_group(coordinator):
    simple = OffsetCommit("simple", "", None, -1, 9, {("t", 1): CommittedOffset(7, 0, "m")})
    assert coordinator.commit(simple, 0) == {("t", 1): "NONE"}
    assert coordinator.group_type("simple") == "classic" and coordinator.share_group_refused("simple")
    assert coordinator.fetch("simple", None, -1, None) == ("NONE", {("t", 1): CommittedOffset(7, 0, "m")})
    assert coordinator.classic.groups.get("simple") is None or coordinator.classic.groups["simple"].state == EMPTY


def test_member_ids_handed_out_but_never_used_are_bounded_and_expire(coordinator):
    handed = [coordinator.join(request(client=f"c{index}"), 0).answer.error for index in range(4)]
    assert handed == ["MEMBER_ID_REQUIRED"] * 3 + ["GROUP_MAX_SIZE_REACHED"]
    coordinator.tick(SESSION_MS)  # never used: each expires after the session timeout it asked for
    assert coordinator.group_type("g") is None
    assert coordinator.join(request(client="late"), SESSION_MS).answer.error == "MEMBER_ID_REQUIRED"


def test_a_zero_or_negative_rebalance_timeout_cannot_spin_the_timers(coordinator):
    for index, timeout_ms in enumerate((0, -5)):
        pending = coordinator.join(JoinRequest(f"odd-{index}", "", None, "consumer", RANGE, SESSION_MS, timeout_ms,
                                               requires_known_member_id=False), 0)
        for at_ms in range(0, 3 * DELAY_MS, 10):
            coordinator.tick(at_ms)
        assert pending.answer.generation_id == 1  # the join phase completed, once
