"""ClassicGroups: the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), as Kafka 4.2 serves it.

    groups = ClassicGroups(config, new_member_id=lambda prefix: f"{prefix}-{uuid4()}")
    pending = groups.join(JoinRequest(group_id="g", member_id="", ...), now_ms)   # a Pending JoinAnswer
    pending = groups.sync("g", member_id, None, generation, "consumer", "range", {member_id: b"..."}, now_ms)
    groups.heartbeat("g", member_id, None, generation, now_ms)        # error name
    groups.leave("g", [(member_id, None)], now_ms)                   # (group error, [member errors])
    groups.tick(now_ms)                                              # timers: join phase, sync, sessions

A port of GroupMetadataManager's classic paths (classicGroupJoinToClassicGroup,
classicGroupSync, classicGroupHeartbeat, classicGroupLeave and their timers),
driven by an explicit clock: each timer Kafka schedules is a deadline here,
fired by `tick`. Followed exactly:
- a new dynamic member on JoinGroup v4+ first gets MEMBER_ID_REQUIRED with
  its id, and must rejoin with it within its session timeout;
- the first rebalance of an empty group waits group.initial.rebalance.delay.ms,
  extended by that delay (up to the rebalance timeout) while members keep
  joining; later join phases complete when every member has rejoined, or at
  the rebalance timeout (the largest of the members'), dropping dynamic members
  that did not rejoin;
- the leader gets every member's metadata for the protocol the members voted
  for; it sends the assignment in SyncGroup, which answers every member;
  members that do not sync within the rebalance timeout are removed;
- a member that neither heartbeats nor commits within its session timeout is
  removed, and the group rebalances; Heartbeat answers REBALANCE_IN_PROGRESS
  while the group prepares a rebalance;
- static members (group.instance.id): a known instance rejoining with a new
  member id replaces the old one (FENCED_INSTANCE_ID for the old id), without
  a rebalance when the group is stable and the selected protocol stays.
Where kipcheck differs, and why:
- membership is not persisted: after a broker restart every member gets
  UNKNOWN_MEMBER_ID and rejoins (committed offsets are persisted);
- a removed member still awaiting its SyncGroup answer gets UNKNOWN_MEMBER_ID,
  and a JoinGroup or SyncGroup superseded by a newer one from the same member
  REBALANCE_IN_PROGRESS (Kafka drops both unanswered, leaving them to the
  client's request timeout), so no parked answer outlives its use;
- an Empty group without committed offsets is forgotten at once (Kafka's
  periodic cleanup does the same later);
- member ids handed out with MEMBER_ID_REQUIRED and not yet used are bounded
  by group.max.size too (Kafka does not count them), so JoinGroups without a
  member id cannot grow a group without limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kipcheck.impl.groups.classic_group import (
    COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup, ClassicMember, JoinAnswer,
    Pending, SyncAnswer)
from kipcheck.impl.groups.config import GroupConfig
from kipcheck.model.errors import Error

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS
MAX_TIMERS_PER_TICK = 10_000


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    requires_known_member_id: bool = True   # JoinGroup v4+
    supports_skip_assignment: bool = True   # JoinGroup v9+


class ClassicGroups:
    def __init__(self, config: GroupConfig, new_member_id: Callable[[str], str]):
        self.config = config
        self.new_member_id = new_member_id
        self.groups: dict[str, ClassicGroup] = {}

    # -- JoinGroup ---------------------------------------------------------------------------

    def join(self, request: JoinRequest, now_ms: int) -> Pending:
        pending = Pending()
        group = self.groups.get(request.group_id)
        if group is None and request.member_id:
            pending.complete(JoinAnswer(Error.UNKNOWN_MEMBER_ID, request.member_id))
            return pending
        if group is None:
            group = self.groups[request.group_id] = ClassicGroup(request.group_id)
        if not self._accept_joining(group, request.member_id):
            group.remove(request.member_id)
            pending.complete(JoinAnswer(Error.GROUP_MAX_SIZE_REACHED, ""))
        elif not group.supports(request.protocol_type, [name for name, _ in request.protocols]):
            pending.complete(JoinAnswer(Error.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
        elif not request.member_id:
            self._join_new_member(group, request, pending, now_ms)
        elif request.member_id in group.pending_join:
            self._add_member(group, request, request.member_id, pending, now_ms)
        else:
            self._join_existing_member(group, request, pending, now_ms)
        return pending

    def _accept_joining(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.classic_max_size
        if group.state == EMPTY:
            return True
        if group.state == PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (member is not None and member.join is not None) or group.awaiting_join() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, request: JoinRequest, pending: Pending, now_ms: int) -> None:
        member_id = self.new_member_id(request.instance_id or request.client_id)
        if request.instance_id is not None and request.instance_id in group.static_members:
            self._replace_static_member(group, request, member_id, pending, now_ms)
        elif request.instance_id is None and request.requires_known_member_id:
            if len(group.pending_join) >= self.config.classic_max_size:
                pending.complete(JoinAnswer(Error.GROUP_MAX_SIZE_REACHED, ""))
                return
            group.pending_join[member_id] = now_ms + request.session_timeout_ms
            pending.complete(JoinAnswer(Error.MEMBER_ID_REQUIRED, member_id))
        else:
            self._add_member(group, request, member_id, pending, now_ms)

    def _join_existing_member(self, group: ClassicGroup, request: JoinRequest, pending: Pending, now_ms: int) -> None:
        error = group.validate_member(request.member_id, request.instance_id)
        if error != Error.NONE:
            pending.complete(JoinAnswer(error, request.member_id))
            return
        member = group.members[request.member_id]
        unchanged = member.protocols == request.protocols
        if group.state == PREPARING_REBALANCE or (group.state == COMPLETING_REBALANCE and not unchanged) \
                or (group.state == STABLE and (group.leader_id == member.member_id or not unchanged)):
            self._update_member(group, member, request, pending)
            self._prepare_rebalance_or_complete_join(group, now_ms)
        elif group.state in (COMPLETING_REBALANCE, STABLE):
            # Same metadata (a lost JoinGroup answer, or a follower's harmless rejoin): this generation again.
            members = group.join_members() if group.leader_id == member.member_id else ()
            pending.complete(self._join_answer(group, member.member_id, members))
        else:
            pending.complete(JoinAnswer(Error.UNKNOWN_MEMBER_ID, request.member_id))

    def _add_member(self, group: ClassicGroup, request: JoinRequest, member_id: str, pending: Pending,
                    now_ms: int) -> None:
        member = ClassicMember(member_id, request.instance_id, request.client_id, request.client_host,
                               request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                               request.protocols, is_new=True)
        if group.state == PREPARING_REBALANCE and group.previous_state == EMPTY:
            group.new_member_added = True
        group.add(member, pending)
        # New members cannot heartbeat yet and may retry their JoinGroup: they expire if never completed.
        member.deadline_ms = now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS
        self._prepare_rebalance_or_complete_join(group, now_ms)

    @staticmethod
    def _update_member(group: ClassicGroup, member: ClassicMember, request: JoinRequest, pending: Pending) -> None:
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        if member.join is not None:  # superseded by this JoinGroup
            member.join.complete(JoinAnswer(Error.REBALANCE_IN_PROGRESS, member.member_id))
        member.join = pending

    def _replace_static_member(self, group: ClassicGroup, request: JoinRequest, new_member_id: str,
                               pending: Pending, now_ms: int) -> None:
        """updateStaticMemberThenRebalanceOrCompleteJoin: the instance's member gets a new id."""
        old_member_id = group.static_members[request.instance_id]
        member = group.members.pop(old_member_id)
        old_protocol = group.protocol_name
        if member.join is not None:
            member.join.complete(JoinAnswer(Error.FENCED_INSTANCE_ID, old_member_id))
        if member.sync is not None:
            member.sync.complete(SyncAnswer(Error.FENCED_INSTANCE_ID))
        member.join = member.sync = None
        member.member_id = new_member_id
        group.members[new_member_id] = member
        group.static_members[request.instance_id] = new_member_id
        group.leader_id = new_member_id if group.leader_id == old_member_id else group.leader_id
        group.pending_sync.discard(old_member_id)
        member.deadline_ms = now_ms + member.session_timeout_ms
        self._update_member(group, member, request, pending)
        if group.state == STABLE and group.select_protocol() == old_protocol:
            is_leader = group.leader_id == new_member_id
            skip = is_leader and request.supports_skip_assignment
            member.join = None
            pending.complete(self._join_answer(group, new_member_id, group.join_members() if skip else (), skip))
        elif group.state == COMPLETING_REBALANCE:
            self._prepare_rebalance(group, now_ms)
        elif group.state == STABLE:
            self._prepare_rebalance_or_complete_join(group, now_ms)
        else:
            self._maybe_complete_join_phase(group, now_ms)

    @staticmethod
    def _join_answer(group: ClassicGroup, member_id: str, members: tuple = (), skip: bool = False) -> JoinAnswer:
        return JoinAnswer(Error.NONE, member_id, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", members, skip)

    # -- the join phase ----------------------------------------------------------------------

    def _prepare_rebalance_or_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms)
        else:
            self._maybe_complete_join_phase(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state == COMPLETING_REBALANCE:
            self._propagate_assignment(group, Error.REBALANCE_IN_PROGRESS, {}, now_ms)
        group.pending_sync.clear()
        group.sync_timer = None
        initial = group.state == EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            group.join_timer = (now_ms + delay, "initial", delay, max(group.rebalance_timeout_ms() - delay, 0))
        group.transition(PREPARING_REBALANCE)
        if not initial:
            if group.all_joined():
                self._complete_join(group, now_ms)
            else:
                group.join_timer = (now_ms + group.rebalance_timeout_ms(), "complete", 0, 0)

    def _maybe_complete_join_phase(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state == PREPARING_REBALANCE and group.previous_state != EMPTY and group.all_joined():
            self._complete_join(group, now_ms)

    def _initial_rebalance_due(self, group: ClassicGroup, delay_ms: int, remaining_ms: int, now_ms: int) -> None:
        """tryCompleteInitialRebalanceElseSchedule: members still arriving extend the initial delay."""
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            next_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = (now_ms + next_delay, "initial", next_delay, max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        group.join_timer = None
        for member in [member for member in group.members.values() if member.join is None and member.instance_id is None]:
            group.remove(member.member_id)  # dynamic members that did not rejoin in time
        if not group.elect_joined_leader() and group.members:
            group.join_timer = (now_ms + group.rebalance_timeout_ms(), "complete", 0, 0)
            return
        group.next_generation()
        if group.state == EMPTY:
            return
        members = group.join_members()
        for member in group.members.values():
            answer = self._join_answer(group, member.member_id, members if member.member_id == group.leader_id else ())
            if member.join is not None:
                member.join.complete(answer)
                member.join = None
            member.deadline_ms = now_ms + member.session_timeout_ms
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_timer = (now_ms + group.rebalance_timeout_ms(), group.generation)

    # -- SyncGroup ---------------------------------------------------------------------------

    def sync(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             now_ms: int) -> Pending:
        pending = Pending()
        group = self.groups.get(group_id)
        if group is None or group.state == EMPTY:
            pending.complete(SyncAnswer(Error.UNKNOWN_MEMBER_ID))
            return pending
        error = self._sync_error(group, member_id, instance_id, generation, protocol_type, protocol_name)
        if error != Error.NONE:
            pending.complete(SyncAnswer(error))
        elif group.state == PREPARING_REBALANCE:
            pending.complete(SyncAnswer(Error.REBALANCE_IN_PROGRESS))
        elif group.state == COMPLETING_REBALANCE:
            member = group.members[member_id]
            if member.sync is not None:  # superseded by this SyncGroup
                member.sync.complete(SyncAnswer(Error.REBALANCE_IN_PROGRESS))
            member.sync = pending
            group.pending_sync.discard(member_id)
            if member_id == group.leader_id:
                full = {member_key: assignments.get(member_key, b"") for member_key in group.members}
                self._propagate_assignment(group, Error.NONE, full, now_ms)
                group.transition(STABLE)
        else:
            group.pending_sync.discard(member_id)
            pending.complete(SyncAnswer(Error.NONE, group.protocol_type, group.protocol_name,
                                        group.members[member_id].assignment))
        if not group.pending_sync:
            group.sync_timer = None
        return pending

    @staticmethod
    def _sync_error(group: ClassicGroup, member_id: str, instance_id: str | None, generation: int,
                    protocol_type: str | None, protocol_name: str | None) -> str:
        error = group.validate_member(member_id, instance_id)
        if error != Error.NONE:
            return error
        if generation != group.generation:
            return Error.ILLEGAL_GENERATION
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol_name):
            return Error.INCONSISTENT_GROUP_PROTOCOL
        return Error.NONE

    def _propagate_assignment(self, group: ClassicGroup, error: str, assignments: dict[str, bytes],
                              now_ms: int) -> None:
        """Set (or, on error, clear) every member's assignment and answer the members awaiting sync."""
        protocol = (group.protocol_type, group.protocol_name) if error == Error.NONE else (None, None)
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
            if member.sync is not None:
                member.sync.complete(SyncAnswer(error, *protocol, member.assignment))
                member.sync = None
                member.deadline_ms = now_ms + member.session_timeout_ms

    # -- Heartbeat, LeaveGroup, offset commits -------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int, now_ms: int) -> str:
        group = self.groups.get(group_id)
        if group is None:
            return Error.UNKNOWN_MEMBER_ID
        error = group.validate_member(member_id, instance_id)
        if error != Error.NONE:
            return error
        if generation != group.generation:
            return Error.ILLEGAL_GENERATION
        member = group.members[member_id]
        member.deadline_ms = now_ms + member.session_timeout_ms
        return Error.REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else Error.NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]], now_ms: int) -> tuple[str, list[str]]:
        """(group-level error, one error per (member id, instance id) asked to leave)."""
        group = self.groups.get(group_id)
        if group is None:
            return Error.UNKNOWN_MEMBER_ID, []
        errors = [self._leave_one(group, member_id, instance_id) for member_id, instance_id in members]
        if Error.NONE in errors:
            if group.state in (STABLE, COMPLETING_REBALANCE):
                self._prepare_rebalance_or_complete_join(group, now_ms)
            elif group.state == PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group, now_ms)
        return Error.NONE, errors

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> str:
        if not member_id:  # an administrator removes a static member by its instance id
            if instance_id is None or instance_id not in group.static_members:
                return Error.UNKNOWN_MEMBER_ID
            self._remove_member(group, group.static_members[instance_id])
            return Error.NONE
        if member_id in group.pending_join:
            del group.pending_join[member_id]
            return Error.NONE
        error = group.validate_member(member_id, instance_id)
        if error == Error.NONE:
            self._remove_member(group, member_id)
        return error

    @staticmethod
    def _remove_member(group: ClassicGroup, member_id: str) -> None:
        member = group.members[member_id]
        for waiting, answer in ((member.join, JoinAnswer(Error.UNKNOWN_MEMBER_ID, "")),
                                (member.sync, SyncAnswer(Error.UNKNOWN_MEMBER_ID))):
            if waiting is not None:
                waiting.complete(answer)
        group.remove(member_id)

    def validate_offset_commit(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                               generation: int, now_ms: int) -> str:
        """ClassicGroup.validateOffsetCommit; a valid commit also counts as a heartbeat."""
        if generation < 0 and group.state == EMPTY:
            return Error.NONE  # a consumer that does not use group management (assign())
        if generation >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error != Error.NONE:
                return error
            if generation != group.generation:
                return Error.ILLEGAL_GENERATION
        elif group.state != EMPTY:
            return Error.UNKNOWN_MEMBER_ID
        if group.state == COMPLETING_REBALANCE:
            return Error.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            member.deadline_ms = now_ms + member.session_timeout_ms
        return Error.NONE

    # -- timers ------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[str]:
        """Fire every due timer (join phase, pending sync, sessions); returns what happened, for the log."""
        events: list[str] = []
        for group in list(self.groups.values()):
            for _ in range(MAX_TIMERS_PER_TICK):
                event = self._fire_one(group, now_ms)
                if event is None:
                    break
                if event:
                    events.append(f"classic group {group.group_id}: {event}")
        return events

    def _fire_one(self, group: ClassicGroup, now_ms: int) -> str | None:
        """Fire the first due timer: what happened ("" if nothing worth logging), None if none was due."""
        if group.join_timer is not None and group.join_timer[0] <= now_ms:
            _, kind, delay, remaining = group.join_timer
            group.join_timer = None
            if kind == "initial":
                self._initial_rebalance_due(group, delay, remaining, now_ms)
            else:
                self._complete_join(group, now_ms)
            return f"join phase timer ({kind}), now {group.state} generation {group.generation}"
        if group.sync_timer is not None and group.sync_timer[0] <= now_ms:
            _, generation = group.sync_timer
            group.sync_timer = None
            if generation == group.generation and group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync:
                missing = sorted(group.pending_sync)
                for member_id in missing:
                    self._remove_member(group, member_id)
                self._prepare_rebalance(group, now_ms)
                return f"members {missing} did not sync in time"
            return ""
        expired = next((member_id for member_id, due in group.pending_join.items() if due <= now_ms), None)
        if expired is not None:
            del group.pending_join[expired]
            self._maybe_complete_join_phase(group, now_ms)
            return f"pending member {expired} did not rejoin in time"
        return self._expire_member(group, now_ms)

    def _expire_member(self, group: ClassicGroup, now_ms: int) -> str | None:
        member = next((member for member in group.members.values()
                       if member.deadline_ms is not None and member.deadline_ms <= now_ms), None)
        if member is None:
            return None
        member.deadline_ms = None  # fired: rearmed by its next heartbeat, commit, join or sync
        if member.satisfied_heartbeat():
            return ""
        self._remove_member(group, member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance_or_complete_join(group, now_ms)
        elif group.state == PREPARING_REBALANCE and group.all_joined():
            self._complete_join(group, now_ms)
        return f"member {member.member_id} session expired"


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
