"""One KIP-848 consumer group's state, and a member's reconciliation (Kafka 4.2's CurrentAssignmentBuilder).

A member moves towards its target assignment in steps (MemberState):
- STABLE: it owns its whole target for its epoch;
- UNREVOKED_PARTITIONS: it must first give up `pending_revocation`; it
  keeps its epoch until a heartbeat reports it no longer owns them (its
  `topic_partitions`; a heartbeat without them counts as still owning);
- UNRELEASED_PARTITIONS: it moved to the target epoch but some of its target
  partitions are still owned (assigned or pending revocation) by another
  member: it gets each of them only once that member has released it.
So a partition is never given to a new owner before its previous owner
acknowledged the revocation, or was fenced (which makes all its partitions
free at once). `reconcile` is CurrentAssignmentBuilder.build(), rule for rule.

The units it moves are those of the assignor (impl/groups/assignors.py):
whole partitions, or, with the key-range assignor, key shares of a split
partition. A unit is given to a member only once no other member holds a
unit that overlaps it (spec/key-range-assign.md KR-13: a key share is revoked
before an overlapping one is assigned, which is the key-handoff rule IC-15);
for whole partitions, overlapping is being the same partition, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from kipcheck.impl.groups.assignors import Assignment, Unit, overlap, partition_of

STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = "STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = 0
    state: str = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def reconciled_to(self, target_epoch: int) -> bool:
        return self.state == STABLE and self.epoch == target_epoch

    def owned(self) -> set[tuple[str, Unit]]:
        """Units this member holds: assigned or still pending revocation (Kafka's partition epochs)."""
        return {(topic, unit) for assignment in (self.assigned, self.pending_revocation)
                for topic, units in assignment.items() for unit in units}


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    metadata: tuple = ()        # the subscribed topics and their partition counts the target was computed for
    session_deadline_ms: dict[str, int] = field(default_factory=dict)
    rebalance_deadline: dict[str, tuple[int, int]] = field(default_factory=dict)  # member -> (due ms, epoch)

    def state(self) -> str:
        """ConsumerGroupState: Empty, Assigning, Reconciling or Stable."""
        if not self.members:
            return "Empty"
        if self.epoch != self.assignment_epoch:
            return "Assigning"
        if any(not member.reconciled_to(self.assignment_epoch) for member in self.members.values()):
            return "Reconciling"
        return "Stable"

    def owned_by_others(self, member_id: str) -> set[tuple[str, Unit]]:
        return {key for other_id, other in self.members.items() if other_id != member_id for key in other.owned()}

    def put(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        self.session_deadline_ms.pop(member_id, None)
        self.rebalance_deadline.pop(member_id, None)
        if member is not None and member.instance_id is not None:
            self.static_members.pop(member.instance_id, None)
        return member


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment, subscribed: frozenset[str],
              owned_by_others: set[tuple[str, Unit]], reported: Assignment | None,
              subscription_changed: bool) -> ConsumerMember:
    """The member's next state towards `target` (CurrentAssignmentBuilder.build)."""
    step = _Step(member, target_epoch, target, subscribed, owned_by_others, reported)
    if member.state == STABLE:
        if member.epoch != target_epoch:
            return step.next_assignment()
        return step.without_unsubscribed() if subscription_changed else member
    if member.state == UNREVOKED_PARTITIONS:
        if step.owns_any(member.pending_revocation):
            return step.without_unsubscribed() if subscription_changed else member
        return step.next_assignment()
    return step.next_assignment()  # UNRELEASED_PARTITIONS: take the target partitions released since


@dataclass
class _Step:
    member: ConsumerMember
    target_epoch: int
    target: Assignment
    subscribed: frozenset[str]
    owned_by_others: set[tuple[str, Unit]]
    reported: Assignment | None  # what the member says it owns; None: not said, so it may own anything

    def owns_any(self, revoking: Assignment) -> bool:
        if self.reported is None:
            return True
        return any(overlap(unit, other) for topic, units in self.reported.items()
                   for unit in units for other in revoking.get(topic, frozenset()))

    def taken(self, topic: str, unit: Unit) -> bool:
        """Whether another member holds a unit overlapping `unit` (for whole partitions: the same one)."""
        return any(overlap(unit, held) for held in self._others_by_partition.get((topic, partition_of(unit)), ()))

    @cached_property
    def _others_by_partition(self) -> dict[tuple[str, int], list[Unit]]:
        by_partition: dict[tuple[str, int], list[Unit]] = {}
        for topic, unit in self.owned_by_others:
            by_partition.setdefault((topic, partition_of(unit)), []).append(unit)
        return by_partition

    def without_unsubscribed(self) -> ConsumerMember:
        """updateCurrentAssignment: only drop the topics the member no longer subscribes to."""
        member, assigned = self.member, self.member.assigned
        if not self.subscribed and not member.pending_revocation:
            kept, revoking = {}, dict(assigned)
        else:
            kept = {topic: parts for topic, parts in assigned.items() if topic in self.subscribed}
            revoking = dict(member.pending_revocation)
            for topic, parts in assigned.items():
                if topic not in self.subscribed:
                    revoking[topic] = revoking.get(topic, frozenset()) | parts
        if kept == assigned:
            return member
        if revoking and self.owns_any(revoking):
            return replace(member, state=UNREVOKED_PARTITIONS, assigned=kept, pending_revocation=revoking)
        return replace(member, assigned=kept)

    def next_assignment(self) -> ConsumerMember:
        """computeNextAssignment: revoke first; assign only partitions no other member holds."""
        member = self.member
        assigned: dict[str, frozenset[int]] = {}
        revoking: dict[str, frozenset[int]] = {}
        adding: dict[str, frozenset[int]] = {}
        unreleased = False
        for topic in set(self.target) | set(member.assigned):
            wanted = self.target.get(topic, frozenset()) if topic in self.subscribed else frozenset()
            current = member.assigned.get(topic, frozenset())
            kept = current & wanted
            mine = member.pending_revocation.get(topic, frozenset())
            free = {unit for unit in wanted - kept if unit in mine or not self.taken(topic, unit)}
            unreleased = unreleased or len(free) < len(wanted - kept)
            for into, parts in ((assigned, kept), (revoking, current - kept), (adding, frozenset(free))):
                if parts:
                    into[topic] = frozenset(parts)
        if revoking and self.owns_any(revoking):
            return replace(member, state=UNREVOKED_PARTITIONS, epoch=member.epoch, previous_epoch=member.epoch,
                           assigned=assigned, pending_revocation=revoking)
        for topic, parts in adding.items():
            assigned[topic] = assigned.get(topic, frozenset()) | parts
        state = UNRELEASED_PARTITIONS if unreleased else STABLE
        return replace(member, state=state, epoch=self.target_epoch, previous_epoch=member.epoch,
                       assigned=assigned, pending_revocation={})
