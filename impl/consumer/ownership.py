"""Ownership: the consumer's partitions and where each stands in KIP-983's revocation (seed 001).

    ownership = Ownership()
    start = ownership.start_poll([Decision("assign", frozenset({tp}), at_ms)])   # PollStart
    ownership.fetchable(), ownership.to_be_revoked(), ownership.owns(tp)
    ownership.delay({tp}) -> bool                 # delayRevoke
    ownership.complete({tp})                      # callback mode: the revoke completes now

This is the consumer's own implementation, written for it and judged against
model/revoke_delay.py through its traces (the oracle never trusts the code it
judges). Each partition the consumer holds is OWNED, REVOKE_NEXT or
REVOKE_THEREAFTER; anything else is not held. `start_poll` runs the seed's
three start-of-poll steps in order, then applies what the coordinator decided
since the last poll, in the order it decided it (spec RD-2 to RD-6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from kipcheck.impl.topic_partition import TopicPartition

OWNED, REVOKE_NEXT, REVOKE_THEREAFTER = "owned", "revoke-next", "revoke-thereafter"
ASSIGN, REVOKE, LOSE = "assign", "revoke", "lose"


@dataclass(frozen=True)
class Decision:
    """What the coordinator decided, as the consumer heard it (`kind` is ASSIGN, REVOKE or LOSE)."""

    kind: str
    partitions: frozenset[TopicPartition]
    at_ms: int
    key_shares: Mapping[TopicPartition, tuple[int, int]] = field(default_factory=dict)  # of assigned partitions


@dataclass(frozen=True)
class PollStart:
    revoked: frozenset[TopicPartition]   # completed at the start of this poll
    lost: frozenset[TopicPartition]      # lost since the last poll
    to_be_revoked: frozenset[TopicPartition]
    ended: frozenset[TopicPartition]     # ownerships that ended here (revoked or lost), even if assigned again


class Ownership:
    def __init__(self) -> None:
        self._where: dict[TopicPartition, str] = {}   # RD-1: one state per held partition; absent: not owned
        self.lost: frozenset[TopicPartition] = frozenset()

    def start_poll(self, decisions: list[Decision]) -> PollStart:
        revoked = frozenset(tp for tp, where in self._where.items() if where == REVOKE_NEXT)  # RD-3 step 1
        for tp in revoked:
            del self._where[tp]
        lost: set[TopicPartition] = set()  # step 2: the lost list starts empty
        for tp, where in self._where.items():  # step 3
            if where == REVOKE_THEREAFTER:
                self._where[tp] = REVOKE_NEXT
        for decision in decisions:
            for tp in decision.partitions:
                self._learn(decision.kind, tp, lost)
        self.lost = frozenset(lost)
        return PollStart(revoked, self.lost, self.to_be_revoked(), revoked | self.lost)

    def _learn(self, kind: str, tp: TopicPartition, lost: set[TopicPartition]) -> None:
        held = self._where.get(tp)
        if kind == ASSIGN:
            self._where[tp] = OWNED  # RD-6: a pending revocation is cancelled, the coordinator wants it here
        elif kind == REVOKE and held == OWNED:
            self._where[tp] = REVOKE_NEXT  # RD-4: a partition already pending stays where it is
        elif kind == LOSE and held is not None:   # RD-5: dropped at once, reported until the next poll
            del self._where[tp]
            lost.add(tp)

    def delay(self, partitions: set[TopicPartition]) -> bool:
        """delayRevoke: all or nothing (RD-9); false if any partition is no longer held."""
        if any(tp not in self._where for tp in partitions):
            return False
        for tp in partitions:
            if self._where[tp] == REVOKE_NEXT:
                self._where[tp] = REVOKE_THEREAFTER
        return True

    def complete(self, partitions: frozenset[TopicPartition]) -> None:
        for tp in partitions:
            self._where.pop(tp, None)

    def owns(self, tp: TopicPartition) -> bool:
        return tp in self._where

    def held(self) -> frozenset[TopicPartition]:
        return frozenset(self._where)

    def fetchable(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, where in self._where.items() if where == OWNED)

    def to_be_revoked(self) -> frozenset[TopicPartition]:   # RD-8: the revoke-next list
        return frozenset(tp for tp, where in self._where.items() if where == REVOKE_NEXT)

    def pending_revocation(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, where in self._where.items() if where != OWNED)
