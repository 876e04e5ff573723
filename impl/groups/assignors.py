"""Server-side assignors of KIP-848 consumer groups: Kafka 4.2's `uniform` and `range`, behind one interface.

    spec = GroupSpec(members={"m1": MemberSubscription(frozenset({"orders"}))}, partitions={"orders": 6},
                     current={"m1": {"orders": frozenset({0, 1})}})
    target = ASSIGNORS["uniform"].assign(spec)       # {"m1": {"orders": frozenset({0, ..., 5})}}

An assignor is any object with a `name` and `assign(spec) -> {member id:
Assignment}` (the `ServerAssignor` protocol): the coordinator calls it with
every member's subscription (topic names that exist), the partition count of
each subscribed topic and the current target assignment, and stores what it
returns as the new target assignment. `register_assignor` adds one (the
key-range assignor plugs in here); `group.consumer.assignors` picks which
ones a broker offers, the first being the default. An assignor must give each
partition of a subscribed topic to exactly one member subscribed to it;
`check_assignment` says whether it did, and the coordinator refuses an
assignment that does not (a broken plug-in never reaches a client).

`uniform` follows Kafka 4.2's UniformAssignor: when every member subscribes to
the same topics it is exactly UniformHomogeneousAssignmentBuilder (balance to
within one partition, then stickiness: a member keeps what it had up to its
quota); with different subscriptions it balances each partition onto the
least loaded eligible member, keeping a partition on its current owner while
that owner is not above the others (the same principles as Kafka's
UniformHeterogeneousAssignmentBuilder, not its exact result). `range` is
Kafka 4.2's RangeAssignor exactly: members ordered static first (by instance
id) then by member id, each takes a contiguous range of every topic it
subscribes to, the first `partitions % members` taking one more.
Kafka walks members in hash-map order where the choice is free; kipcheck walks
them in member-id order, so an assignment is reproducible.

`key-range-round-robin` is the cooperative assignor of the individual-commit
proposal (spec/key-range-assign.md KR-12 to KR-14): model/key_range_assign's
`assign`, whose shares become units of an Assignment: a partition a member
holds whole is its number, as above, and a share of a split partition is a
`KeyShare(partition, low, high)`. A member opts in to key sharing by asking
for this assignor; a topic allows it when its `accept.range.fetch` is true
and the coordinator's `accept.individual.commit` is (GroupSpec's
`key_share_topics`, `coordinator_allows_ic`).
Its assignments are validated by the model (`check`), not by `check_assignment`,
which knows whole partitions only.

`linear-hashing` is KIP-287's (impl/groups/linear_hashing.py): a job's
partitions to its processors, named by the members' instance ids, by linear
hashing over the job record's initial count (GroupSpec's `job_record`). It
leaves the partitions of a processor that is not a member to nobody, so it
has its own `check` too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from kipcheck.impl.groups.linear_hashing import LinearHashingAssignor
from kipcheck.model import key_range_assign
from kipcheck.model.violation import Violation


class KeyShare(NamedTuple):
    """A share of a split partition: the key-hash range [low, high] of it (KR-12)."""
    partition: int
    low: int
    high: int


Unit = int | KeyShare                     # a whole partition, or a key share of one
Assignment = dict[str, frozenset[Unit]]  # topic name -> units (partitions, in groups whose assignor does not split)


@dataclass(frozen=True)
class MemberSubscription:
    topics: frozenset[str]
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None


@dataclass(frozen=True)
class GroupSpec:
    members: dict[str, MemberSubscription]
    partitions: dict[str, int]  # every subscribed topic that exists -> its partition count
    current: dict[str, Assignment] = field(default_factory=dict)  # the target assignment so far
    key_share_topics: frozenset[str] = frozenset()  # topics whose accept.range.fetch is true (KR-4)
    coordinator_allows_ic: bool = True               # the broker's accept.individual.commit (KR-4)
    group_id: str = ""
    job_record: bytes | None = None                  # the group's KIP-287 job record (the linear-hashing assignor)

    def homogeneous(self) -> bool:
        return len({member.topics for member in self.members.values()}) <= 1

    def subscribed(self, member_id: str) -> list[str]:
        return sorted(topic for topic in self.members[member_id].topics if self.partitions.get(topic, 0) > 0)


class ServerAssignor(Protocol):
    name: str

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]: ...


class UniformAssignor:
    name = "uniform"

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        if spec.homogeneous():
            return _uniform_homogeneous(spec)
        return _uniform_heterogeneous(spec)


class RangeAssignor:
    name = "range"

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        members = sorted(spec.members, key=lambda member_id: _range_order(spec, member_id))
        subscribers: dict[str, int] = {}
        for member_id in members:
            for topic in spec.subscribed(member_id):
                subscribers[topic] = subscribers.get(topic, 0) + 1
        next_start = {topic: 0 for topic in subscribers}
        extra = {topic: spec.partitions[topic] % count for topic, count in subscribers.items()}
        target: dict[str, Assignment] = {}
        for member_id in members:
            assignment: Assignment = {}
            for topic in spec.subscribed(member_id):
                quota = spec.partitions[topic] // subscribers[topic]
                if extra[topic] > 0:
                    quota, extra[topic] = quota + 1, extra[topic] - 1
                start, end = next_start[topic], min(next_start[topic] + quota, spec.partitions[topic])
                next_start[topic] = end
                if start < end:
                    assignment[topic] = frozenset(range(start, end))
            target[member_id] = assignment
        return target


def _range_order(spec: GroupSpec, member_id: str) -> tuple:
    """Static members first, by instance id; then dynamic members by member id (RangeAssignor.sortMemberIds)."""
    instance_id = spec.members[member_id].instance_id
    return (0, instance_id, "") if instance_id is not None else (1, "", member_id)


def _uniform_homogeneous(spec: GroupSpec) -> dict[str, Assignment]:
    """UniformHomogeneousAssignmentBuilder: revoke above quota or unsubscribed, then fill the unfilled members."""
    members = sorted(spec.members)
    topics = spec.subscribed(members[0])
    if not topics:
        return {member_id: {} for member_id in members}
    owned = {(topic, partition) for assignment in spec.current.values()
             for topic, partitions in assignment.items() for partition in partitions}
    unassigned = [(topic, partition) for topic in topics for partition in range(spec.partitions[topic])
                  if (topic, partition) not in owned]
    total = sum(spec.partitions[topic] for topic in topics)
    minimum, extra_left = divmod(total, len(members))
    target: dict[str, dict[str, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for index, member_id in enumerate(members):
        quota = minimum + (1 if extra_left > 0 else 0)
        has_extra = extra_left > 0
        kept: dict[str, set[int]] = {}
        for topic, partitions in sorted(spec.current.get(member_id, {}).items()):
            if topic not in topics:
                continue
            for partition in sorted(partitions):
                if quota > 0:
                    quota -= 1
                    kept.setdefault(topic, set()).add(partition)
                else:
                    unassigned.append((topic, partition))
        if quota > 0 and has_extra and len(members) - index > extra_left:
            quota, has_extra = quota - 1, False  # leave the extra partition to a later member
        if quota > 0:
            unfilled.append((member_id, quota))
        if has_extra:
            extra_left -= 1
        target[member_id] = kept
    position = 0
    for member_id, quota in unfilled:
        for topic, partition in unassigned[position:position + quota]:
            target[member_id].setdefault(topic, set()).add(partition)
        position += quota
    if position < len(unassigned):
        raise AssertionError("uniform assignor left partitions unassigned")
    return {member_id: _frozen(assignment) for member_id, assignment in target.items()}


def _uniform_heterogeneous(spec: GroupSpec) -> dict[str, Assignment]:
    """Each partition to an eligible member: its current owner unless it holds more than the least loaded."""
    load = {member_id: 0 for member_id in spec.members}
    owner_of = {(topic, partition): member_id for member_id, assignment in spec.current.items()
                if member_id in spec.members for topic, partitions in assignment.items() for partition in partitions}
    target: dict[str, dict[str, set[int]]] = {member_id: {} for member_id in spec.members}
    for topic in sorted(spec.partitions):
        eligible = sorted(member_id for member_id in spec.members if topic in spec.subscribed(member_id))
        if not eligible:
            continue
        for partition in range(spec.partitions[topic]):
            lightest = min(eligible, key=lambda member_id: (load[member_id], member_id))
            owner = owner_of.get((topic, partition))
            chosen = owner if owner in eligible and load[owner] <= load[lightest] else lightest
            target[chosen].setdefault(topic, set()).add(partition)
            load[chosen] += 1
    return {member_id: _frozen(assignment) for member_id, assignment in target.items()}


def _frozen(assignment: dict[str, set[int]]) -> Assignment:
    return {topic: frozenset(partitions) for topic, partitions in assignment.items() if partitions}


class KeyRangeRoundRobinAssignor:
    """The seed's KeyRangeBasedRoundRobinAssignor: the model's layout (KR-8), as units (KR-12)."""
    name = key_range_assign.SERVER_ASSIGNOR

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        target: dict[str, dict[str, set[Unit]]] = {member_id: {} for member_id in spec.members}
        # The model's own layout: every partition covered (KR-1) by disjoint shares (KR-2) of subscribed topics
        # (KR-3), split only where opting-in members outnumber the partitions (KR-5), into contiguous near-equal
        # ranges (KR-6), one per opting-in subscriber, spread evenly (KR-7).
        for member_id, entries in key_range_assign.assign(self.model_group(spec)).items():
            for topic, partition, share in entries:
                unit = partition if share is None else KeyShare(partition, *share)
                target[member_id].setdefault(topic, set()).add(unit)
        return {member_id: _frozen(assignment) for member_id, assignment in target.items()}

    def model_group(self, spec: GroupSpec) -> key_range_assign.Group:
        """The model's input: a member opts in to key sharing by asking for this assignor (KR-12)."""
        members = {member_id: key_range_assign.Member(frozenset(spec.subscribed(member_id)),
                                                      subscription.server_assignor == self.name)
                   for member_id, subscription in spec.members.items()}
        return key_range_assign.Group(dict(spec.partitions), members,
                                      {topic: topic in spec.key_share_topics for topic in spec.partitions},
                                      spec.coordinator_allows_ic)

    def check(self, spec: GroupSpec, target: dict[str, Assignment]) -> str | None:
        """None if the model allows `target` (KR-1 to KR-7), else the broken clause and why."""
        try:
            key_range_assign.validate(self.model_group(spec), model_entries(target))
        except Violation as violation:
            return str(violation)
        return None


def model_entries(target: dict[str, Assignment]) -> dict[str, list[key_range_assign.Entry]]:
    """An assignment as the model writes one: [(topic, partition, (low, high) or None for whole), ...] a member."""
    return {member_id: sorted(((topic, partition_of(unit), None if isinstance(unit, int) else (unit.low, unit.high))
                               for topic, units in assignment.items() for unit in units),
                              key=lambda entry: (entry[0], entry[1], entry[2] or (0, 0)))
            for member_id, assignment in target.items()}


def partition_of(unit: Unit) -> int:
    return unit if isinstance(unit, int) else unit.partition


def key_range_of(unit: Unit) -> tuple[int, int]:
    return (0, key_range_assign.HASH_MAX) if isinstance(unit, int) else (unit.low, unit.high)


def overlap(unit: Unit, other: Unit) -> bool:
    """Whether two units of one topic share a key hash: the same partition and overlapping shares (KR-13)."""
    return partition_of(unit) == partition_of(other) and \
        key_range_assign.overlaps(key_range_of(unit), key_range_of(other))


ASSIGNORS: dict[str, ServerAssignor] = {}


def register_assignor(assignor: ServerAssignor) -> None:
    """Make an assignor available by its name to `group.consumer.assignors` and to ConsumerGroupHeartbeat."""
    ASSIGNORS[assignor.name] = assignor


for _builtin in (UniformAssignor(), RangeAssignor(), KeyRangeRoundRobinAssignor(), LinearHashingAssignor()):
    register_assignor(_builtin)


def check_assignment(spec: GroupSpec, target: dict[str, Assignment]) -> str | None:
    """None if every partition of every subscribed topic goes to exactly one member subscribed to it."""
    if set(target) != set(spec.members):
        return f"assignment names members {sorted(target)}, group has {sorted(spec.members)}"
    seen: dict[tuple[str, int], str] = {}
    for member_id, assignment in target.items():
        for topic, partitions in assignment.items():
            if topic not in spec.subscribed(member_id):
                return f"member {member_id} is given {topic}, which it does not subscribe to"
            for partition in partitions:
                if not 0 <= partition < spec.partitions[topic]:
                    return f"member {member_id} is given {topic}-{partition}, which does not exist"
                if (topic, partition) in seen:
                    return f"{topic}-{partition} is given to both {seen[topic, partition]} and {member_id}"
                seen[topic, partition] = member_id
    wanted = {(topic, partition) for member_id in spec.members for topic in spec.subscribed(member_id)
              for partition in range(spec.partitions[topic])}
    missing = sorted(wanted - set(seen))
    return f"partitions left unassigned: {missing[:5]}" if missing else None
