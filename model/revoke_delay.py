"""KIP-983: a consumer that delays partition revocation across polls (seed 001).

Partitions are named "topic:partition". Clause ids refer to spec/revoke-delay.md.

Library API (pure, deterministic):

- `RevokeDelayConsumer()`: a consumer that owns nothing.
- `.assign(partitions)`, `.revoke(partitions)`, `.lose(partitions)`: what the group
  coordinator did; queued and learned during the next `poll` (RD-2).
- `.poll() -> PollResult(revoked, to_be_revoked, lost, fetchable)`: run one poll;
  `fetchable` is where its records may come from (RD-7).
- `.check_records_from(partitions)`: raise Violation unless a poll may return records from them.
- `.delay_revoke(partitions) -> bool`: the consumer's delayRevoke (RD-9).
- `.commit(partition) -> error name`: "NONE" or "ILLEGAL_GENERATION" (RD-10);
  `.commit_may_be_refused(partition)`: a loss not yet learned names it (RD-13).
- `.release(partitions)`: the consumer acknowledged their revocation to the coordinator
  (RD-11: raise Violation unless their revoke completed; RD-12 in the coordinator's view).
- `RevokeDelayConsumer(view=COORDINATOR)`: the group coordinator's view of one member (RD-12):
  what it did applies at once, a `release` ends the member's ownership.
- `.state(partition) -> one of STATES`, and the attributes `owned`, `revoke_next`,
  `revoke_thereafter`, `lost` (sets) for inspection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from kipcheck.model.errors import Error
from kipcheck.model.violation import Violation

NOT_OWNED, OWNED, REVOKE_NEXT, REVOKE_THEREAFTER = "not_owned", "owned", "revoke_next", "revoke_thereafter"
STATES = (NOT_OWNED, OWNED, REVOKE_NEXT, REVOKE_THEREAFTER)
CONSUMER, COORDINATOR = "consumer", "coordinator"
VIEWS = (CONSUMER, COORDINATOR)


@dataclass(frozen=True)
class PollResult:
    revoked: frozenset[str]
    to_be_revoked: frozenset[str]
    lost: frozenset[str]
    fetchable: frozenset[str]


@dataclass
class RevokeDelayConsumer:
    # RD-1: the assignment is `owned` (which includes partitions pending revocation); the two
    # revoke lists are subsets of it. `lost` is the lost list (RD-5).
    owned: set[str] = field(default_factory=set)
    revoke_next: set[str] = field(default_factory=set)
    revoke_thereafter: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)
    # RD-2: coordinator decisions not yet learned, in the order they were made.
    pending: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    view: str = CONSUMER

    def state(self, partition: str) -> str:
        if partition not in self.owned:
            return NOT_OWNED
        if partition in self.revoke_next:
            return REVOKE_NEXT
        return REVOKE_THEREAFTER if partition in self.revoke_thereafter else OWNED

    # What the coordinator did (RD-2: learned at the next poll).

    def assign(self, partitions: Iterable[str]) -> None:
        self._decided("assign", frozenset(partitions))

    def revoke(self, partitions: Iterable[str]) -> None:
        self._decided("revoke", frozenset(partitions))

    def lose(self, partitions: Iterable[str]) -> None:
        self._decided("lose", frozenset(partitions))

    def _decided(self, kind: str, partitions: frozenset[str]) -> None:
        if self.view == COORDINATOR:
            self._learn(kind, partitions)  # RD-12: the coordinator knows at once what it did
        else:
            self.pending.append((kind, partitions))

    def _learn(self, kind: str, partitions: frozenset[str]) -> None:
        {"assign": self._learn_assign, "revoke": self._learn_revoke, "lose": self._learn_lose}[kind](partitions)

    def _learn_assign(self, partitions: frozenset[str]) -> None:
        # RD-6: assigned partitions are owned; a pending revocation of one is cancelled.
        self.owned |= partitions
        self.revoke_next -= partitions
        self.revoke_thereafter -= partitions

    def _learn_revoke(self, partitions: frozenset[str]) -> None:
        # RD-4: owned partitions with no revoke pending go on revoke-next; others are unchanged.
        self.revoke_next |= (partitions & self.owned) - self.revoke_thereafter

    def _learn_lose(self, partitions: frozenset[str]) -> None:
        # RD-5: a lost partition leaves the assignment and both revoke lists, and joins the lost list.
        lost = partitions & self.owned
        self.owned -= lost
        self.revoke_next -= lost
        self.revoke_thereafter -= lost
        self.lost |= lost

    def _fetchable(self) -> frozenset[str]:
        # RD-7: records only from owned partitions that are not pending revocation.
        return frozenset(self.owned - self.revoke_next - self.revoke_thereafter)

    def poll(self) -> PollResult:
        # RD-3: the three start-of-poll steps, in the seed's order: (1) complete the revoke of
        # revoke-next, (2) empty the lost list, (3) revoke-thereafter becomes revoke-next.
        revoked = frozenset(self.revoke_next)
        self.owned -= revoked
        self.lost = set()
        self.revoke_next, self.revoke_thereafter = self.revoke_thereafter, set()
        # RD-2: then what the coordinator did since the last poll, in order.
        for kind, partitions in self.pending:
            self._learn(kind, partitions)
        self.pending = []
        # RD-8: to_be_revoked is the revoke-next list as the poll returns.
        return PollResult(revoked, frozenset(self.revoke_next), frozenset(self.lost), self._fetchable())

    def check_records_from(self, partitions: Iterable[str]) -> None:
        """Raise Violation if the last poll may not return records from all of `partitions`."""
        forbidden = set(partitions) - self._fetchable()
        if forbidden:
            # RD-7: never from a partition pending revocation, revoked, lost or never assigned.
            states = ", ".join(f"{partition} is {self.state(partition)}" for partition in sorted(forbidden))
            allowed = f"records only from {sorted(self._fetchable())}"
            raise Violation("RD-7", allowed, f"records from {sorted(forbidden)} ({states})")

    def delay_revoke(self, partitions: Iterable[str]) -> bool:
        partitions = set(partitions)
        # RD-9: all or nothing: false, and nothing moves, if any partition is no longer owned.
        if not partitions <= self.owned:
            return False
        delayed = partitions & self.revoke_next
        self.revoke_next -= delayed
        self.revoke_thereafter |= delayed
        return True

    def commit(self, partition: str) -> str:
        # RD-10: commits are allowed while the partition is owned, pending revocation included.
        return Error.NONE if partition in self.owned else Error.ILLEGAL_GENERATION

    def commit_may_be_refused(self, partition: str) -> bool:
        # RD-13: the coordinator lost the partition for this consumer, which learns it at its next poll.
        return any(kind == "lose" and partition in partitions for kind, partitions in self.pending)

    def release(self, partitions: Iterable[str]) -> None:
        """The consumer told the coordinator it holds `partitions` no more (KIP-848's acknowledgement)."""
        partitions = frozenset(partitions)
        if self.view == COORDINATOR:
            # RD-12: the member's acknowledgement ends its ownership; commits after it break RD-10.
            self.owned -= partitions
            self.revoke_next -= partitions
            self.revoke_thereafter -= partitions
            return
        held = partitions & self.owned
        if held:
            # RD-11: only once the revoke completed at the start of a poll (or the partition was lost).
            states = ", ".join(f"{partition} is {self.state(partition)}" for partition in sorted(held))
            raise Violation("RD-11", "release only of partitions whose revoke completed or that were lost",
                            f"release of {sorted(held)} ({states})")
