"""One classic consumer group's state (Kafka 4.2's ClassicGroup and ClassicGroupMember), and the answers it parks.

The group states and their allowed previous states are Kafka's
(ClassicGroupState): Empty <- PreparingRebalance <- {Stable,
CompletingRebalance, Empty}; CompletingRebalance <- PreparingRebalance;
Stable <- CompletingRebalance. kipcheck never unloads or deletes a group with
members, so no group is ever Dead (DescribeGroups names unknown groups Dead). The broker never reads the
protocol metadata or assignments: they are the client-side assignor's bytes,
relayed from the members to the leader and from the leader to the members.

A JoinGroup or SyncGroup answer may come later than its request (the join
phase completes when every member has rejoined or the rebalance timeout
passes; a follower's SyncGroup waits for the leader's): such an answer is a
`Pending`, which the wire handler awaits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from kipcheck.model.errors import Error

EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = (
    "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
_VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
}


class Pending:
    """An answer that may be known only later: `complete(answer)` once; listeners hear it."""

    def __init__(self) -> None:
        self.answer: Any = None
        self._listeners: list[Callable[[Any], None]] = []

    @property
    def done(self) -> bool:
        return self.answer is not None

    def complete(self, answer: Any) -> bool:
        if self.answer is not None:
            return False
        self.answer = answer
        for listener in self._listeners:
            listener(answer)
        return True

    def on_complete(self, listener: Callable[[Any], None]) -> None:
        if self.answer is not None:
            listener(self.answer)
        else:
            self._listeners.append(listener)


@dataclass(frozen=True)
class JoinAnswer:
    error: str
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata), leader only
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncAnswer:
    error: str
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False)
class ClassicMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), the member's preference order
    assignment: bytes = b""
    join: Pending | None = None   # set while the member awaits its JoinGroup answer
    sync: Pending | None = None   # set while the member awaits its SyncGroup answer
    is_new: bool = False
    deadline_ms: int | None = None  # when its heartbeat (session) expires; None: not armed

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        return next((metadata for name, metadata in self.protocols if name == protocol), b"")

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names() if name in candidates)

    def satisfied_heartbeat(self) -> bool:
        """New members may expire while awaiting join; others awaiting join or sync satisfy heartbeats."""
        return not self.is_new and (self.join is not None or self.sync is not None)


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: str = EMPTY
    previous_state: str = DEAD
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_join: dict[str, int] = field(default_factory=dict)    # member id handed out -> expiry
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False
    join_timer: tuple[int, str, int, int] | None = None  # (due ms, "initial" | "complete", delay, remaining)
    sync_timer: tuple[int, int] | None = None            # (due ms, generation)

    def transition(self, state: str) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: {self.state} -> {state} is not a valid transition")
        self.previous_state, self.state = self.state, state

    def awaiting_join(self) -> int:
        return sum(1 for member in self.members.values() if member.join is not None)

    def all_joined(self) -> bool:
        return self.awaiting_join() == len(self.members) and not self.pending_join

    def rebalance_timeout_ms(self) -> int:
        """The largest of the members' (at least 1 ms, so a timer it sets is always in the future)."""
        return max(1, *(member.rebalance_timeout_ms for member in self.members.values()))

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[PREPARING_REBALANCE]

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        if self.state == EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(name in self._candidates() for name in names)

    def _candidates(self) -> set[str]:
        """Protocols every member supports."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name in set(member.protocol_names()):
                counts[name] = counts.get(name, 0) + 1
        return {name for name, count in counts.items() if count == len(self.members)}

    def select_protocol(self) -> str:
        """Each member votes for its first candidate; the most votes win (ClassicGroup.selectProtocol)."""
        candidates = self._candidates()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def validate_member(self, member_id: str, instance_id: str | None) -> str:
        """NONE, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID (ClassicGroup.validateMember)."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return Error.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return Error.FENCED_INSTANCE_ID
        return Error.NONE if member_id in self.members else Error.UNKNOWN_MEMBER_ID

    def add(self, member: ClassicMember, join: Pending | None) -> None:
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join = join
        self.members[member.member_id] = member
        self.pending_join.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None:
            self.static_members.pop(member.instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.pop(member_id, None)
        self.pending_sync.discard(member_id)

    def join_members(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """The members as the leader's JoinGroup answer lists them, with the selected protocol's metadata."""
        return tuple((member.member_id, member.instance_id, member.metadata(self.protocol_name or ""))
                     for member in self.members.values())

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is None:
            return False
        if leader.join is not None:
            return True
        rejoined = next((member_id for member_id, member in self.members.items() if member.join is not None), None)
        if rejoined is not None:
            self.leader_id = rejoined
        return rejoined is not None

    def next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(EMPTY)
        self.pending_sync.clear()
