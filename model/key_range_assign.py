"""The cooperative key-range assignor of the individual-commit proposal (seeds 000/003).

Clause ids refer to spec/key-range-assign.md. The hash space of a partition is
[0, HASH_MAX]; a share is a closed range `(lo, hi)` of it, `None` meaning the
whole partition.

Library API (pure, deterministic):

- `split(k) -> [(lo, hi), ...]`: the model's k shares of a split partition (KR-8), an equal split.
- `near_equal(shares) -> bool`: the sizes of a split's shares differ by at most k (KR-6).
- `Group(topics, members, topic_allows_key_share={}, coordinator_allows_ic=True)`,
  with `Member(topics, allow_key_share)`: the assignor's input; `.sharing_triggered(topic)`.
- `assign(group) -> {member: [(topic, partition, share or None), ...]}`: the model's
  own layout (KR-8), one valid answer among many.
- `validate(group, assignment)`: raise Violation naming the broken clause unless
  `assignment` (same shape as `assign`'s) is allowed (KR-1 to KR-7).

The assignor in a KIP-848 group coordinator (KR-12 to KR-14):

- `SERVER_ASSIGNOR`: the name a member asks for, which is how it allows key share (KR-12).
- `overlaps(share, other)`: whether two shares of one partition hold a common hash value;
  a share is handed on only once no other member holds one overlapping it (KR-13).
- `shares_to_wire({partition: share})`, `shares_from_wire(bounds)`: the KeyRanges field of
  ConsumerGroupHeartbeat's TopicPartitions, (partition, low, high) triples (KR-14).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from kipcheck.model.violation import Violation

HASH_MAX = 2**63 - 1
WHOLE = (0, HASH_MAX)
# KR-12: a KIP-848 member allows key share by asking for this server assignor (ServerAssignor).
SERVER_ASSIGNOR = "key-range-round-robin"

Share = tuple[int, int]
Entry = tuple[str, int, Share | None]


def split(k: int) -> list[Share]:
    """KR-8: k contiguous ascending shares of the 2^63 hash values, the remainder on the first ones."""
    assert k >= 1
    quotient, remainder = divmod(HASH_MAX + 1, k)
    shares, low = [], 0
    for index in range(k):
        size = quotient + (1 if index < remainder else 0)
        shares.append((low, low + size - 1))
        low += size
    return shares


def near_equal(shares: list[Share]) -> bool:
    """KR-6: the sizes (hash values held) of the k shares differ by at most k.

    Both the seed's Java long division (average (2^63 - 1) div k, the last share taking the rest,
    up to k values more) and an equal split (sizes differing by at most 1) pass; oracle/proofs/
    key_range_split.py proves it for k up to 2^16."""
    sizes = [high - low + 1 for low, high in shares]
    return max(sizes) - min(sizes) <= len(shares)


@dataclass(frozen=True)
class Member:
    topics: frozenset[str]
    allow_key_share: bool


@dataclass(frozen=True)
class Group:
    topics: dict[str, int]  # topic -> number of partitions
    members: dict[str, Member]
    topic_allows_key_share: dict[str, bool] = field(default_factory=dict)
    coordinator_allows_ic: bool = True

    def __post_init__(self) -> None:
        unknown = {topic for info in self.members.values() for topic in info.topics} - set(self.topics)
        if unknown or any(count < 1 for count in self.topics.values()):
            raise ValueError(f"members subscribe to unknown topics {sorted(unknown)}, or a topic has no partitions")

    def subscribers(self, topic: str) -> list[str]:
        return sorted(member for member, info in self.members.items() if topic in info.topics)

    def opting_in(self, topic: str) -> list[str]:
        return [member for member in self.subscribers(topic) if self.members[member].allow_key_share]

    def subscribed_topics(self) -> list[str]:
        return sorted({topic for info in self.members.values() for topic in info.topics})

    def sharing_allowed(self, topic: str) -> bool:
        # KR-4: the coordinator and the topic must allow it (missing topic setting: false).
        return self.coordinator_allows_ic and self.topic_allows_key_share.get(topic, False)

    def sharing_triggered(self, topic: str) -> bool:
        # KR-5: more opting-in subscribers than partitions, where sharing is allowed.
        return self.sharing_allowed(topic) and len(self.opting_in(topic)) > self.topics[topic]


def assign(group: Group) -> dict[str, list[Entry]]:
    """KR-8: the model's layout, round robin in member-id order."""
    assignment: dict[str, list[Entry]] = {member: [] for member in sorted(group.members)}
    for topic in group.subscribed_topics():
        partitions = group.topics[topic]
        if group.sharing_triggered(topic):
            owners: dict[int, list[str]] = defaultdict(list)
            for index, member in enumerate(group.opting_in(topic)):
                owners[index % partitions].append(member)
            for partition, members in owners.items():
                shares = split(len(members)) if len(members) > 1 else [None]
                for member, share in zip(members, shares):
                    assignment[member].append((topic, partition, share))
        else:
            subscribers = group.subscribers(topic)
            for partition in range(partitions):
                assignment[subscribers[partition % len(subscribers)]].append((topic, partition, None))
    return assignment


def validate(group: Group, assignment: dict[str, list[Entry]]) -> None:
    """Raise Violation unless `assignment` is an allowed answer of the assignor for `group`."""
    shares: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for member, entries in assignment.items():
        for topic, partition, share in entries:
            # KR-3: only members of the group, and only topics they subscribe to.
            if member not in group.members or topic not in group.members[member].topics:
                raise Violation("KR-3", "entries only for topics the member subscribes to", f"{member} gets {topic}:{partition}")
            low, high = share if share is not None else WHOLE
            # KR-1: the partition exists and the share lies in the hash space.
            if not 0 <= partition < group.topics[topic] or not 0 <= low <= high <= HASH_MAX:
                allowed = f"a partition of {topic} below {group.topics[topic]}, a range within [0, {HASH_MAX}]"
                raise Violation("KR-1", allowed, f"{member} gets {topic}:{partition} {[low, high]}")
            shares[(topic, partition)].append((low, high, member))
    for topic in group.subscribed_topics():
        for partition in range(group.topics[topic]):
            owned = sorted(shares[(topic, partition)])
            _check_coverage(f"{topic}:{partition}", owned)
            if len(owned) > 1:
                _check_split(group, topic, partition, owned)
        if group.sharing_triggered(topic):
            _check_triggered_layout(group, topic, shares)


def _check_coverage(name: str, owned: list[tuple[int, int, str]]) -> None:
    next_hash = 0
    for low, high, member in owned:
        # KR-2: no hash value has two owners.
        if low < next_hash:
            overlap = f"{member}'s [{low}, {high}] overlaps a share ending at {next_hash - 1}"
            raise Violation("KR-2", f"{name} shares disjoint", overlap)
        # KR-1: no hash value is left without an owner.
        if low > next_hash:
            raise Violation("KR-1", f"{name} covered from {next_hash}", f"no owner for [{next_hash}, {low - 1}]")
        next_hash = high + 1
    if next_hash != HASH_MAX + 1:
        raise Violation("KR-1", f"{name} covered up to {HASH_MAX}", f"no owner for [{next_hash}, {HASH_MAX}]")


def _check_split(group: Group, topic: str, partition: int, owned: list[tuple[int, int, str]]) -> None:
    name, members = f"{topic}:{partition}", [member for _, _, member in owned]
    # KR-4: coordinator, topic and every owner must allow sharing.
    refusing = [member for member in members if not group.members[member].allow_key_share]
    if not group.sharing_allowed(topic) or refusing:
        why = f"{refusing} do not allow key share" if refusing else "the coordinator or the topic does not allow it"
        raise Violation("KR-4", f"{name} whole to one member ({why})", f"{name} split among {members}")
    # KR-5: only when opting-in subscribers outnumber the partitions.
    if not group.sharing_triggered(topic):
        counts = f"{len(group.opting_in(topic))} opting-in subscribers, {group.topics[topic]} partitions"
        raise Violation("KR-5", f"{name} whole to one member ({counts})", f"{name} split among {members}")
    # KR-6: near-equal shares (KR-1 and KR-2 made them contiguous, ascending and covering); any owner order.
    shares = [(low, high) for low, high, _ in owned]
    if not near_equal(shares):
        k, sizes = len(owned), [high - low + 1 for low, high in shares]
        raise Violation("KR-6", f"{name} split into {k} shares whose sizes differ by at most {k}",
                        f"sizes {sizes} (differing by {max(sizes) - min(sizes)}) for {members}")


def _check_triggered_layout(group: Group, topic: str, shares: dict) -> None:
    partitions = range(group.topics[topic])
    owners_per_partition = [[member for _, _, member in shares[(topic, partition)]] for partition in partitions]
    owners = sorted(member for members in owners_per_partition for member in members)
    counts = [len(members) for members in owners_per_partition]
    # KR-7: exactly the opting-in subscribers, one share each, owner counts differing by at most one.
    if owners != group.opting_in(topic) or max(counts) - min(counts) > 1:
        allowed = f"{topic} shared once each by {group.opting_in(topic)}, owner counts differing by <= 1"
        raise Violation("KR-7", allowed, f"owners per partition {owners_per_partition}")


def overlaps(share: Share | None, other: Share | None) -> bool:
    """KR-13: two shares of one partition hold a common hash value (None: the whole partition)."""
    (low, high), (other_low, other_high) = share or WHOLE, other or WHOLE
    return low <= other_high and other_low <= high


def shares_to_wire(shares: dict[int, Share]) -> tuple[int, ...]:
    # KR-14: one int64 array of (partition, low, high) triples; a partition without one is whole.
    return tuple(bound for partition, share in sorted(shares.items()) for bound in (partition, *share))


def shares_from_wire(bounds: tuple[int, ...] | list[int]) -> dict[int, Share]:
    """KR-14: the key shares of a KeyRanges array; ValueError unless it is triples of ranges within the hash space."""
    if len(bounds) % 3:
        raise ValueError(f"KeyRanges holds (partition, low, high) triples, found {len(bounds)} values")
    shares = {int(bounds[index]): (int(bounds[index + 1]), int(bounds[index + 2])) for index in range(0, len(bounds), 3)}
    if len(shares) * 3 != len(bounds) or any(not 0 <= low <= high <= HASH_MAX for low, high in shares.values()):
        raise ValueError(f"KeyRanges must name each partition once, with a range within [0, {HASH_MAX}]")
    return shares
