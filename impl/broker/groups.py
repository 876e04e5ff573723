"""Share group membership at the group coordinator: ShareGroupHeartbeat and ShareGroupDescribe.

Follows Kafka 4.2's GroupMetadataManager for share groups (KIP-932 with the
client-generated member ids of KIP-1082):
- epoch 0 joins (or rejoins) with a client-chosen member id and its
  subscription; epoch -1 leaves; any other epoch must be the member's current
  epoch or the previous one (a lost response), else FENCED_MEMBER_EPOCH;
- an epoch other than 0 from a member the coordinator does not know gets
  UNKNOWN_MEMBER_ID, which makes the client rejoin with epoch 0 (after a
  broker restart, or after its session timed out);
- a member that has not heartbeated for `session_timeout_ms` is removed;
- the group epoch goes up when a member joins, leaves or is expired, or
  changes its subscription, and when the subscribed topics' partitions change
  (Kafka's shareGroupHeartbeat and shareGroupFenceMember; KIP-848's group
  epoch); at a heartbeat of any member a group epoch past the assignment
  epoch makes the target assignment be computed again, from the members'
  subscriptions and the topics that exist, at that epoch;
- a member moves to the target assignment and its epoch only when it
  heartbeats (Kafka's ShareGroupAssignmentBuilder): ShareGroupDescribe shows
  each member's epoch and assignment as it was last told them, and the
  response carries the full assignment (share groups need no revocation
  handshake: Kafka assigns at once). Partitions go round-robin over the subscribed members in
  member-id order; with more members than partitions, members share
  partitions (member i gets partition i mod P), as Kafka's SimpleAssignor lets
  several members consume one share-partition.
Membership is not persisted: after a restart members rejoin (KIP-932: "the
members of the groups and their assignments are not persisted").
Leaving or expiring does not release records here; the share session's close
or the acquisition lock does (Kafka 4.2).
A group id names one group of one type: a heartbeat for an id a classic or
consumer group holds (`id_taken`) answers GROUP_ID_NOT_FOUND, as Kafka 4.2's
getOrMaybeCreateShareGroup ("Group ... is not a share group").
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

from kipcheck.model.errors import Error

Assignment = dict[str, tuple[int, ...]]  # topic name -> partitions


@dataclass
class Member:
    member_id: str
    epoch: int
    previous_epoch: int
    subscribed: tuple[str, ...]
    deadline_ms: int
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: Assignment = field(default_factory=dict)


@dataclass
class Group:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0   # the group epoch the target assignment was computed at
    target: dict[str, Assignment] = field(default_factory=dict)   # member id -> its target assignment
    members: dict[str, Member] = field(default_factory=dict)
    subscribed_ever: set[str] = field(default_factory=set)  # topics any member subscribed to (in this process)


@dataclass(frozen=True)
class HeartbeatAnswer:
    error: str
    member_id: str | None
    member_epoch: int
    assignment: Assignment | None  # None: unchanged since the member last heard it


class ShareGroups:
    """All share groups of this broker's group coordinator.

    `partitions_of(topic_name)` tells how many partitions a topic has (0 if it
    does not exist).
    """

    def __init__(self, partitions_of: Callable[[str], int], session_timeout_ms: int = 45000, max_size: int = 200,
                 id_taken: Callable[[str], bool] = lambda group_id: False):
        self.partitions_of = partitions_of
        self.session_timeout_ms = session_timeout_ms
        self.max_size = max_size
        self.id_taken = id_taken
        self.groups: dict[str, Group] = {}
        # (deadline, group id, member id) of every heartbeat: expiry looks at the due ones only, not at every
        # group (tens of thousands of groups made each heartbeat and each timer tick scan them all).
        # An entry whose member heartbeated again since is skipped when it comes due.
        self._deadlines: list[tuple[int, str, str]] = []

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, subscribed: tuple[str, ...] | None,
                  at_ms: int, rack_id: str | None = None, client_id: str = "", client_host: str = "") -> HeartbeatAnswer:
        self.expire(at_ms)
        if not group_id or not member_id:
            return HeartbeatAnswer(Error.INVALID_REQUEST, member_id, 0, None)
        if group_id not in self.groups and self.id_taken(group_id):
            return HeartbeatAnswer(Error.GROUP_ID_NOT_FOUND, member_id, 0, None)
        group = self.groups.setdefault(group_id, Group(group_id))
        member = group.members.get(member_id)
        if member_epoch == -1:
            if member is not None:
                del group.members[member_id]
                group.epoch += 1   # a member left
            return HeartbeatAnswer(Error.NONE, member_id, -1, None)
        if member_epoch == 0:
            if subscribed is None:
                return HeartbeatAnswer(Error.INVALID_REQUEST, member_id, 0, None)
            if member is None and len(group.members) >= self.max_size:
                return HeartbeatAnswer(Error.GROUP_MAX_SIZE_REACHED, member_id, 0, None)
            if member is None or member.subscribed != tuple(subscribed):
                group.epoch += 1   # a member joined, or rejoined with another subscription
            member = Member(member_id, 0, 0, tuple(subscribed), 0, rack_id, client_id, client_host)
            group.members[member_id] = member
        elif member is None:
            return HeartbeatAnswer(Error.UNKNOWN_MEMBER_ID, member_id, 0, None)
        elif member_epoch not in (member.epoch, member.previous_epoch):
            return HeartbeatAnswer(Error.FENCED_MEMBER_EPOCH, member_id, member.epoch, None)
        elif subscribed is not None and member.subscribed != tuple(subscribed):
            member.subscribed = tuple(subscribed)
            group.epoch += 1   # a subscription changed
        member.deadline_ms = at_ms + self.session_timeout_ms
        heapq.heappush(self._deadlines, (member.deadline_ms, group_id, member_id))
        group.subscribed_ever.update(member.subscribed)
        self._reconcile(group, member)
        changed = member_epoch != member.epoch or subscribed is not None
        return HeartbeatAnswer(Error.NONE, member_id, member.epoch, dict(member.assignment) if changed else None)

    def expire(self, at_ms: int) -> list[tuple[str, str]]:
        """Remove members whose session timed out; returns (group id, member id) of each."""
        expired = []
        while self._deadlines and self._deadlines[0][0] <= at_ms:
            deadline_ms, group_id, member_id = heapq.heappop(self._deadlines)
            group = self.groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if member is not None and member.deadline_ms == deadline_ms:
                del group.members[member_id]
                group.epoch += 1   # a member was expired (fenced)
                expired.append((group_id, member_id))
        return expired

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def has_subscribed(self, group_id: str, topic: str) -> bool:
        """Whether a member of the group ever subscribed to `topic`: Kafka's coordinator then initializes
        the share-partitions of the topic for the group (GroupMetadataManager, InitializeShareGroupState)."""
        group = self.groups.get(group_id)
        return group is not None and topic in group.subscribed_ever

    def create_empty(self, group_id: str) -> None:
        """An empty share group, as an admin's AlterShareGroupOffsets makes one for an id no group has."""
        self.groups.setdefault(group_id, Group(group_id))

    def forget(self, group_id: str) -> None:
        """DeleteGroups: a group without members is forgotten (its share-partitions' state is the engine's)."""
        group = self.groups.get(group_id)
        assert group is None or not group.members, f"share group {group_id} has members"
        self.groups.pop(group_id, None)

    def _reconcile(self, group: Group, member: Member) -> None:
        """At `member`'s heartbeat: the target assignment computed again where the group epoch moved past it (or
        the subscribed topics' partitions changed, which moves the group epoch), then the member moved to it."""
        target = target_assignment(group.members, self.partitions_of)
        if target != group.target:
            if group.epoch == group.assignment_epoch:
                group.epoch += 1   # the subscribed topics' partitions changed (Kafka's metadata hash)
            group.target = target
        group.assignment_epoch = group.epoch
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
            member.assignment = group.target[member.member_id]


def target_assignment(members: dict[str, Member], partitions_of: Callable[[str], int]) -> dict[str, Assignment]:
    """Round-robin partitions over each topic's subscribers (see the module docstring)."""
    target: dict[str, dict[str, list[int]]] = {member_id: {} for member_id in members}
    topics = sorted({topic for member in members.values() for topic in member.subscribed})
    for topic in topics:
        count = partitions_of(topic)
        subscribers = sorted(member_id for member_id, member in members.items() if topic in member.subscribed)
        if not count or not subscribers:
            continue
        if len(subscribers) <= count:
            pairs = [(subscribers[partition % len(subscribers)], partition) for partition in range(count)]
        else:
            pairs = [(member_id, index % count) for index, member_id in enumerate(subscribers)]
        for member_id, partition in pairs:
            target[member_id].setdefault(topic, []).append(partition)
    return {member_id: {topic: tuple(sorted(parts)) for topic, parts in assignment.items()}
            for member_id, assignment in target.items()}
