"""ConsumerGroups: KIP-848 consumer groups (ConsumerGroupHeartbeat), as Kafka 4.2's GroupMetadataManager serves them.

    groups = ConsumerGroups(config, partitions_of=lambda topic: 3, topic_names=lambda: ["orders"])
    answer = groups.heartbeat(HeartbeatRequest(group_id="g", member_id="m1", member_epoch=0,
                                               rebalance_timeout_ms=30000, subscribed_names=("orders",),
                                               owned=()), now_ms)
    answer.error, answer.member_epoch, answer.assignment     # {"orders": frozenset({0, 1, 2})} or None
    groups.tick(now_ms)                                      # session and rebalance timeouts

One heartbeat, in Kafka's order (consumerGroupHeartbeat):
1. the request is checked (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR); epoch -1
   leaves, -2 is a static member's temporary leave (its partitions stay
   assigned to its instance for the session timeout);
2. the member is found or created: epoch 0 (re)joins; any other epoch must be
   the member's, or its previous one when the member owns no more than its
   assignment (a lost answer), else FENCED_MEMBER_EPOCH; an unknown member
   gets UNKNOWN_MEMBER_ID; a full group GROUP_MAX_SIZE_REACHED; a static
   instance still held by a live member UNRELEASED_INSTANCE_ID;
3. the group epoch is bumped when a subscription changed or the subscribed
   topics' partitions changed (Kafka's metadata hash), and when a member
   leaves or is fenced; a group epoch ahead of the assignment epoch makes the
   group's server assignor (the one most members ask for, else the first of
   group.consumer.assignors) compute a new target assignment for every member;
4. the member reconciles towards its target (consumer_group.reconcile);
   entering UNREVOKED_PARTITIONS starts its rebalance timeout, and a member
   still at that epoch when it passes is fenced: it leaves the group and all
   its partitions are free (lost to it);
5. the answer carries the member's epoch, the heartbeat interval, and its
   assigned partitions when it (re)joined, sent a full request or they changed.
A member that does not heartbeat within group.consumer.session.timeout.ms is
fenced. With `traces` (impl/groups/tracing.CoordinatorTraces) every change to
what a member holds is written to its revoke-delay trace in the coordinator's
view (spec/revoke-delay.md RD-12), and in a group of the key-range assignor
its assignments and the key ranges each member holds. A member asks
for key sharing by asking for `key-range-round-robin`; `key_share_topic(topic)`
says whether a topic allows it (its accept.range.fetch) and
`coordinator_allows_ic` is the broker's accept.individual.commit (KR-4); both
are set by the broker. Where kipcheck differs: membership is not persisted, so after a
broker restart a heartbeat with an epoch above 0 for a group this broker does
not know answers UNKNOWN_MEMBER_ID (the member rejoins) where Kafka, whose
groups survive a restart, would answer GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from kipcheck.impl.groups.assignors import (
    ASSIGNORS, Assignment, GroupSpec, KeyRangeRoundRobinAssignor, MemberSubscription, check_assignment)
from kipcheck.impl.groups.config import GroupConfig
from kipcheck.impl.groups.consumer_group import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH, UNREVOKED_PARTITIONS, ConsumerGroup, ConsumerMember, reconcile)
from kipcheck.impl.groups.tracing import CoordinatorTraces
from kipcheck.model.errors import Error


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: tuple[str, ...] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None  # the member's topic_partitions, by topic name; None: not sent
    client_id: str = ""
    client_host: str = ""

    def is_full(self) -> bool:
        subscribed = self.subscribed_names is not None or self.subscribed_regex is not None
        return self.rebalance_timeout_ms != -1 and subscribed and self.owned is not None


@dataclass(frozen=True)
class HeartbeatAnswer:
    error: str
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None  # None: unchanged, not sent
    message: str | None = None


class Refused(Exception):
    """A heartbeat refused with Kafka's error `error`; nothing changed."""

    def __init__(self, error: str, message: str = ""):
        super().__init__(message or error)
        self.error = error


class ConsumerGroups:
    def __init__(self, config: GroupConfig, partitions_of: Callable[[str], int], topic_names: Callable[[], list[str]],
                 other_group: Callable[[str], bool] = lambda group_id: False):
        self.config = config
        self.partitions_of = partitions_of
        self.topic_names = topic_names
        self.other_group = other_group  # the id is held by a group of another type that cannot become this one
        self.groups: dict[str, ConsumerGroup] = {}
        self.traces: CoordinatorTraces | None = None
        self.key_share_topic: Callable[[str], bool] = lambda topic: False
        self.coordinator_allows_ic = True
        self.job_record_of: Callable[[str], bytes | None] = lambda group_id: None  # KIP-287's, set by the broker

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatAnswer:
        try:
            self._check(request)
            if request.member_epoch < 0:
                return self._leave(request, now_ms)
            return self._heartbeat(request, now_ms)
        except Refused as refused:
            return HeartbeatAnswer(refused.error, request.member_id, 0, None, str(refused))

    def _check(self, request: HeartbeatRequest) -> None:
        """throwIfConsumerGroupHeartbeatRequestIsInvalid (v1: the client generates its member id)."""
        for value, name in ((request.member_id, "MemberId"), (request.group_id, "GroupId"),
                            (request.instance_id, "InstanceId"), (request.rack_id, "RackId")):
            if value == "" or (name in ("MemberId", "GroupId") and value is None):
                raise Refused(Error.INVALID_REQUEST, f"{name} can't be empty.")
        if request.member_epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise Refused(Error.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or request.owned:
                raise Refused(Error.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_names is None and request.subscribed_regex is None:
                raise Refused(Error.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must be "
                                                     "non-null when (re-)joining.")
        elif request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and request.instance_id is None:
            raise Refused(Error.INVALID_REQUEST, "InstanceId can't be null.")
        elif request.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise Refused(Error.INVALID_REQUEST, "MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self.config.consumer_assignors:
            raise Refused(Error.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {request.server_assignor} is not supported. "
                                                      f"Supported assignors: {', '.join(self.config.consumer_assignors)}.")
        if request.subscribed_regex:
            try:
                re.compile(request.subscribed_regex)
            except re.error as error:
                raise Refused(Error.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex: {error}") from None

    # -- joining and heartbeating ----------------------------------------------------------------

    def _heartbeat(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatAnswer:
        group = self.groups.get(request.group_id)
        if group is None:
            if self.other_group(request.group_id):
                raise Refused(Error.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group.")
            if request.member_epoch != 0:
                raise Refused(Error.UNKNOWN_MEMBER_ID, f"Group {request.group_id} is not known to this coordinator.")
            group = ConsumerGroup(request.group_id)
        if len(group.members) >= self.config.consumer_max_size and request.member_id not in group.members:
            raise Refused(Error.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                                                        f"{self.config.consumer_max_size} members.")
        member, replaced = self._member(group, request)
        updated = _updated(member, request)
        subscription_changed = (updated.subscribed_names, updated.subscribed_regex) != \
                               (member.subscribed_names, member.subscribed_regex)
        members = {**{member_id: other for member_id, other in group.members.items() if member_id != replaced},
                   updated.member_id: updated}
        metadata = self._metadata(members.values())
        epoch = group.epoch + 1 if group.epoch == 0 or subscription_changed or metadata != group.metadata \
            else group.epoch
        target = self._target(group, members, epoch, replaced, updated, now_ms) \
            if epoch > group.assignment_epoch else None
        self.groups[group.group_id] = group  # nothing below can refuse: the heartbeat is applied
        if replaced is not None:
            kept_target = group.target.get(replaced, {})
            group.remove(replaced)
            group.target[updated.member_id] = kept_target  # the instance keeps its target assignment
        group.epoch, group.metadata = epoch, metadata
        if target is not None:
            group.target, group.assignment_epoch = target, epoch
        group.put(updated)
        reconciled = self._reconcile(group, updated, request.owned, subscription_changed, now_ms)
        if self.traces is not None:  # a static member taking over an instance starts with nothing of its own
            before = member if replaced is None else ConsumerMember(updated.member_id)
            self.traces.reconciled(group.group_id, before, reconciled, request.owned, now_ms, self._key_shares(group))
        group.session_deadline_ms[reconciled.member_id] = now_ms + self.config.consumer_session_timeout_ms
        send = request.member_epoch == 0 or request.is_full() or reconciled.assigned != member.assigned
        return HeartbeatAnswer(Error.NONE, reconciled.member_id, reconciled.epoch,
                               dict(reconciled.assigned) if send else None)

    def _member(self, group: ConsumerGroup, request: HeartbeatRequest) -> tuple[ConsumerMember, str | None]:
        """(the member the heartbeat is for, the id of a static member it replaces)."""
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                if request.member_epoch != 0:
                    raise Refused(Error.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of group "
                                                           f"{group.group_id}.")
                return ConsumerMember(request.member_id), None
            _check_epoch(member, request)
            return member, None
        static_id = group.static_members.get(request.instance_id)
        static = group.members.get(static_id) if static_id is not None else None
        if request.member_epoch == 0:
            if static is None or static.member_id == request.member_id:
                return group.members.get(request.member_id, ConsumerMember(request.member_id)), None
            if static.epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise Refused(Error.UNRELEASED_INSTANCE_ID, f"Static member {request.member_id} with instance id "
                                                            f"{request.instance_id} cannot join the group because the "
                                                            f"instance id is owned by {static.member_id} member.")
            return replace(static, member_id=request.member_id, epoch=0, previous_epoch=0), static.member_id
        _check_static(static, request)
        _check_epoch(static, request)
        return static, None

    def _metadata(self, members) -> tuple:
        topics = sorted({topic for member in members for topic in self._subscribed(member)})
        return tuple((topic, self.partitions_of(topic)) for topic in topics)

    def _subscribed(self, member: ConsumerMember) -> frozenset[str]:
        """The topics that exist among the member's names, and those its regex fully matches."""
        names = {topic for topic in member.subscribed_names if self.partitions_of(topic) > 0}
        if member.subscribed_regex:
            pattern = re.compile(member.subscribed_regex)
            names |= {topic for topic in self.topic_names() if pattern.fullmatch(topic)}
        return frozenset(names)

    def _target(self, group: ConsumerGroup, members: dict[str, ConsumerMember], epoch: int, replaced: str | None,
                updated: ConsumerMember, now_ms: int) -> dict[str, Assignment]:
        current = dict(group.target)
        if replaced is not None:
            current[updated.member_id] = current.pop(replaced, {})  # a static member keeps its target
        spec = GroupSpec(
            {member_id: MemberSubscription(self._subscribed(member), member.instance_id, member.rack_id,
                                           member.server_assignor)
             for member_id, member in members.items()},
            {topic: count for topic, count in self._metadata(members.values())},
            {member_id: assignment for member_id, assignment in current.items() if member_id in members},
            frozenset(topic for topic, _ in self._metadata(members.values()) if self.key_share_topic(topic)),
            self.coordinator_allows_ic, group.group_id, self.job_record_of(group.group_id))
        assignor = self.assignor_name(members.values())
        target = ASSIGNORS[assignor].assign(spec)
        if isinstance(ASSIGNORS[assignor], KeyRangeRoundRobinAssignor) and self.traces is not None:
            # before the check: a wrong assignment is in the trace too
            self.traces.assigned(group.group_id, ASSIGNORS[assignor].model_group(spec), target, now_ms)
        # An assignor with its own check (key shares; partitions left to nobody) is held to it instead.
        check = getattr(ASSIGNORS[assignor], "check", None)
        problem = check(spec, target) if check is not None else check_assignment(spec, target)
        if problem is not None:
            raise Refused(Error.UNKNOWN_SERVER_ERROR, f"assignor {assignor} at group epoch {epoch}: {problem}")
        return target

    def assignor_name(self, members) -> str:
        """The server assignor most members ask for, else the default (ConsumerGroup.preferredServerAssignor)."""
        counts: dict[str, int] = {}
        for member in members:
            if member.server_assignor is not None:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        return max(sorted(counts), key=lambda name: counts[name]) if counts else self.config.consumer_assignors[0]

    def _key_shares(self, group: ConsumerGroup) -> bool:
        """Whether the group's assignor is the key-range one (its members' key ranges are traced)."""
        return isinstance(ASSIGNORS[self.assignor_name(group.members.values())], KeyRangeRoundRobinAssignor)

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None,
                   subscription_changed: bool, now_ms: int) -> ConsumerMember:
        if not subscription_changed and member.reconciled_to(group.assignment_epoch):
            return member
        updated = reconcile(member, group.assignment_epoch, group.target.get(member.member_id, {}),
                            self._subscribed(member), group.owned_by_others(member.member_id), owned,
                            subscription_changed)
        if updated != member:
            group.put(updated)
            if updated.state == UNREVOKED_PARTITIONS:
                group.rebalance_deadline[member.member_id] = (now_ms + updated.rebalance_timeout_ms, updated.epoch)
            else:
                group.rebalance_deadline.pop(member.member_id, None)
        return updated

    # -- leaving, fencing, timers -----------------------------------------------------------------

    def _leave(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatAnswer:
        group = self.groups.get(request.group_id)
        if group is None:
            raise Refused(Error.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
        if request.instance_id is None:
            if request.member_id not in group.members:
                raise Refused(Error.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of group "
                                                       f"{group.group_id}.")
            self.fence(group, request.member_id, now_ms, lost=False)
            return HeartbeatAnswer(Error.NONE, request.member_id, request.member_epoch)
        static_id = group.static_members.get(request.instance_id)
        static = group.members.get(static_id) if static_id is not None else None
        _check_static(static, request)
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            left = replace(static, epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            group.put(left)
            group.rebalance_deadline.pop(static.member_id, None)
            if self.traces is not None:
                self.traces.reconciled(group.group_id, static, left, None, now_ms, self._key_shares(group))
            return HeartbeatAnswer(Error.NONE, static.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        self.fence(group, static.member_id, now_ms, lost=False)
        return HeartbeatAnswer(Error.NONE, request.member_id, request.member_epoch)

    def leave_members(self, group_id: str, members: list[tuple[str, str | None]], now_ms: int) -> list[str]:
        """A classic LeaveGroup naming members of a consumer group (an administrator removing them):
        one error per member; the valid ones are fenced together (classicGroupLeaveToConsumerGroup)."""
        group = self.groups[group_id]
        errors, leaving = [], set()
        for member_id, instance_id in members:
            if instance_id is None:
                member = group.members.get(member_id)
                error = Error.UNKNOWN_MEMBER_ID if member is None else Error.NONE
            else:
                member = group.members.get(group.static_members.get(instance_id, ""))
                error = Error.UNKNOWN_MEMBER_ID if member is None else \
                    Error.FENCED_INSTANCE_ID if member_id and member.member_id != member_id else Error.NONE
            errors.append(error)
            if error == Error.NONE:
                leaving.add(member.member_id)
        if leaving:
            key_shares = self._key_shares(group)
            for member_id in leaving:
                removed = group.remove(member_id)
                if self.traces is not None and removed is not None:
                    # removed, not released
                    self.traces.ended(group.group_id, removed, now_ms, lost=True, key_shares=key_shares)
            group.epoch += 1
        return errors

    def subscribed_topics(self, group_id: str) -> frozenset[str]:
        group = self.groups.get(group_id)
        members = group.members.values() if group is not None else ()
        return frozenset(topic for member in members for topic in self._subscribed(member))

    def fence(self, group: ConsumerGroup, member_id: str, now_ms: int, lost: bool = True) -> None:
        """Remove the member (all its partitions become free: lost to it, or released when it left) and bump
        the group epoch."""
        key_shares = self._key_shares(group)
        member = group.remove(member_id)
        group.epoch += 1
        if self.traces is not None and member is not None:
            self.traces.ended(group.group_id, member, now_ms, lost, key_shares)

    def tick(self, now_ms: int) -> list[str]:
        """Fence members whose session or rebalance timeout passed; returns what happened, for the log."""
        events = []
        for group in list(self.groups.values()):
            for member_id, due in sorted(group.session_deadline_ms.items()):
                if due <= now_ms and member_id in group.members:
                    self.fence(group, member_id, now_ms)
                    events.append(f"consumer group {group.group_id}: member {member_id} session expired")
            for member_id, (due, epoch) in sorted(group.rebalance_deadline.items()):
                member = group.members.get(member_id)
                if due <= now_ms and member is not None and member.epoch == epoch:
                    self.fence(group, member_id, now_ms)
                    events.append(f"consumer group {group.group_id}: member {member_id} did not revoke within "
                                  f"its rebalance timeout at epoch {epoch}: fenced, its partitions are lost")
        return events

    @staticmethod
    def validate_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int) -> str:
        """ConsumerGroup.validateOffsetCommit: the committing member's epoch must be its current one."""
        if member_epoch < 0 and not group.members:
            return Error.NONE  # an administrator, or a consumer that does not use group management
        member = group.members.get(member_id)
        if member is None:
            return Error.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return Error.UNSUPPORTED_VERSION  # members of the consumer protocol commit with OffsetCommit v9+
        return Error.NONE if member_epoch == member.epoch else Error.STALE_MEMBER_EPOCH

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> str:
        """ConsumerGroup.validateOffsetFetch."""
        if member_id is None and member_epoch < 0:
            return Error.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return Error.UNKNOWN_MEMBER_ID
        return Error.NONE if member_epoch == member.epoch else Error.STALE_MEMBER_EPOCH


def _updated(member: ConsumerMember, request: HeartbeatRequest) -> ConsumerMember:
    """The member with what the request changes (ConsumerGroupMember.Builder.maybeUpdate*)."""
    changes: dict = {"client_id": request.client_id, "client_host": request.client_host}
    for name, value in (("instance_id", request.instance_id), ("rack_id", request.rack_id),
                        ("server_assignor", request.server_assignor), ("subscribed_regex", request.subscribed_regex)):
        if value is not None:
            changes[name] = value or None
    if request.rebalance_timeout_ms != -1:
        changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    if request.subscribed_names is not None:
        changes["subscribed_names"] = tuple(sorted(set(request.subscribed_names)))
    return replace(member, **changes)


def _check_epoch(member: ConsumerMember, request: HeartbeatRequest) -> None:
    """throwIfConsumerGroupMemberEpochIsInvalid: epoch 0 rejoins; a lost answer's previous epoch is forgiven."""
    epoch = request.member_epoch
    if epoch == 0 or epoch == member.epoch:
        return
    if epoch < member.epoch and epoch == member.previous_epoch and _subset(request.owned, member.assigned):
        return
    raise Refused(Error.FENCED_MEMBER_EPOCH,
                  f"The consumer group member has a {'greater' if epoch > member.epoch else 'smaller'}"
                  f" member epoch ({epoch}) than the one known by the group coordinator "
                  f"({member.epoch}). The member must abandon all its partitions and rejoin.")


def _check_static(static: ConsumerMember | None, request: HeartbeatRequest) -> None:
    if static is None:
        raise Refused(Error.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
    if static.member_id != request.member_id:
        raise Refused(Error.FENCED_INSTANCE_ID, f"Static member {request.member_id} with instance id "
                                                f"{request.instance_id} was fenced by member {static.member_id}.")


def _subset(owned: Assignment | None, assigned: Assignment) -> bool:
    return owned is not None and all(parts <= assigned.get(topic, frozenset()) for topic, parts in owned.items())
