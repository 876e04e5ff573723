"""Partial views: the steps of some members of a share-partition (SP-80) or of a session cache (SS-41),
judged without the others.

model/share_partition.py needs every member's steps: a record acquired by a member the trace does not show
looks available to it, and SPSO moves for reasons it never sees. A view of some members (a proxy in front of
some of a group's consumers) is judged by the rules below instead, each of which holds whatever the unseen
members did, so that an unseen member can never cause a false alarm:

- SP-81: a record is held by at most one seen member at a time;
- SP-82: the delivery counts seen for a record go up, while the share-partition cannot have been reset;
- SP-83: acknowledging records the member surely holds is not refused for their state;
- SP-84: no record is delivered more than the delivery count limit allows.

Time comes from outside: an acquisition was served between `sent_ms` (the request left) and `at_ms` (its
answer came), and a lock lasts at least the broker's minimum lock duration from then, since a group's
dynamic lock duration can be set no lower (Kafka's group.share.min.record.lock.duration.ms). So a record is
*surely held* by a member from its acquisition until `sent_ms + min_lock_duration_ms`, unless the member
gave it back (an acknowledgement that changed it, a leave) or renewed it (which restarts the lock no earlier
than the renewal was sent).

    view = SharePartitionView(delivery_count_limit=5, min_lock_duration_ms=15000)
    view.acquire(at_ms=120, sent_ms=100, actor="c1", runs=[(0, 9, 1)])   # Violation: SP-81, SP-82, SP-84
    view.acknowledge(at_ms=130, actor="c1", batches=[(0, 4, "accept")], error="NONE")  # Violation: SP-83
    view.leave("c1")           # its session ended: it holds nothing
    view.reset()               # the share-partition may have been reloaded or reset: what was seen says nothing
    unseen_sessions(max_sessions=2000, error="SHARE_SESSION_LIMIT_REACHED")   # SS-41: 2000

A session cache seen in part (SS-41) is the share-session model's, with one difference: a full ShareFetch
refused for the session limit found the cache full of sessions the trace does not show (`unseen_sessions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kipcheck.model.errors import Error
from kipcheck.model.violation import Violation

# SP-83: the answers about the records themselves. Other errors (the leader moved, the share coordinator
# cannot be reached) say nothing about them and are allowed for any request.
STATE_ERRORS = frozenset({Error.INVALID_RECORD_STATE, Error.INVALID_REQUEST, Error.REQUEST_TIMED_OUT})
HOLDING_TYPES = frozenset({"accept", "release", "reject", "renew"})
FINAL_TYPES = frozenset({"accept", "reject"})


@dataclass
class Hold:
    actor: str
    until_ms: int  # surely held before this time (SP-81)


@dataclass
class Seen:
    delivery_count: int
    since_reset: int  # the view's reset count when it was seen (SP-82)


class SharePartitionView:
    def __init__(self, delivery_count_limit: int, min_lock_duration_ms: int, window_max_records: int):
        self.delivery_count_limit = delivery_count_limit
        self.min_lock_duration_ms = min_lock_duration_ms
        self.window_max_records = window_max_records  # offsets this far below the highest seen are forgotten
        self.holds: dict[int, Hold] = {}
        self.seen: dict[int, Seen] = {}
        self.present: set[str] = set()  # seen members whose session is open
        self.resets = 0
        self.highest = -1

    def acquire(self, at_ms: int, sent_ms: int, actor: str, runs: Sequence[Sequence[int]]) -> None:
        """Check an acquisition the actor was answered at `at_ms` (sent at `sent_ms`), then remember it."""
        self.present.add(actor)
        for first, last, count in runs:
            for offset in range(first, last + 1):
                self._check_acquired(at_ms, actor, offset, count)
        for first, last, count in runs:
            for offset in range(first, last + 1):
                self.holds[offset] = Hold(actor, sent_ms + self.min_lock_duration_ms)
                self.seen[offset] = Seen(count, self.resets)
            self.highest = max(self.highest, last)
        self._forget_below(self.highest - self.window_max_records)

    def _check_acquired(self, at_ms: int, actor: str, offset: int, count: int) -> None:
        if count > self.delivery_count_limit:  # SP-84: archived once delivered delivery_count_limit times
            raise Violation("SP-84", f"a delivery count of at most {self.delivery_count_limit}",
                            f"offset {offset} delivered with count {count}")
        hold = self.holds.get(offset)
        if hold is not None and at_ms < hold.until_ms:  # SP-81: one holder at a time
            raise Violation("SP-81", f"offset {offset} left alone: {hold.actor} holds it until at least "
                                     f"{hold.until_ms}", f"acquired by {actor} at {at_ms}")
        seen = self.seen.get(offset)
        if seen is not None and seen.since_reset == self.resets and count <= seen.delivery_count:  # SP-82
            raise Violation("SP-82", f"offset {offset} delivered with a count above {seen.delivery_count}",
                            f"count {count}")

    def acknowledge(self, at_ms: int, actor: str, batches: Sequence[tuple[int, int, str]], error: str | None) -> None:
        """Check the answer `error` (None: not observed) to the actor's acknowledgement sent at `at_ms`."""
        self.present.add(actor)
        if error in STATE_ERRORS and self._surely_holds(at_ms, actor, batches):
            raise Violation("SP-83", f"NONE: {actor} holds {[[first, last] for first, last, _ in batches]}",
                            f"error {error}")
        if error == Error.NONE:
            for first, last, kind in batches:
                for offset in range(first, last + 1):
                    self._acknowledged(at_ms, actor, offset, kind)
        elif error is None:  # the answer left the partition out: the records may have changed
            self._drop(actor, [(first, last) for first, last, _ in batches])

    def _acknowledged(self, at_ms: int, actor: str, offset: int, kind: str) -> None:
        hold = self.holds.get(offset)
        if kind == "renew":
            if hold is not None and hold.actor == actor:  # SP-83: the lock restarts no earlier than sent
                hold.until_ms = max(hold.until_ms, at_ms + self.min_lock_duration_ms)
            return
        if hold is not None and hold.actor == actor:
            del self.holds[offset]
        if kind in FINAL_TYPES or kind == "gap":  # terminal: never delivered again
            self.seen.pop(offset, None)

    def _surely_holds(self, at_ms: int, actor: str, batches: Sequence[tuple[int, int, str]]) -> bool:
        """Every record of every batch held by the actor at `at_ms`, in batches of holding types sharing no
        offset (SP-11 and SP-19 refuse the others whole)."""
        covered: set[int] = set()
        for first, last, kind in batches:
            if kind not in HOLDING_TYPES or first > last:
                return False
            for offset in range(first, last + 1):
                hold = self.holds.get(offset)
                if offset in covered or hold is None or hold.actor != actor or at_ms >= hold.until_ms:
                    return False
                covered.add(offset)
        return bool(covered)

    def leave(self, actor: str) -> None:
        """The actor's session ended (or the view stopped following it): it holds nothing it is known to."""
        self._drop(actor, None)
        self.present.discard(actor)
        if not self.present:
            self.resets += 1  # SP-82: with no seen member in it, the group may have been empty and reset

    def reset(self) -> None:
        """SP-82: the share-partition may have been reloaded (its leader restarted or moved) or its offsets
        reset: no hold and no delivery count seen before says anything about what follows."""
        self.holds.clear()
        self.resets += 1

    def _drop(self, actor: str, ranges: list[tuple[int, int]] | None) -> None:
        for offset in [offset for offset, hold in self.holds.items() if hold.actor == actor
                       and (ranges is None or any(first <= offset <= last for first, last in ranges))]:
            del self.holds[offset]

    def _forget_below(self, offset: int) -> None:
        """Offsets so far below the highest acquired lie below SPSO (SP-7): never delivered again."""
        if offset > 0 and len(self.seen) > 2 * self.window_max_records:
            for old in [old for old in self.seen if old < offset]:
                self.seen.pop(old)
                self.holds.pop(old, None)


def unseen_sessions(max_sessions: int, error: str | None) -> int:
    """SS-41: the sessions a partial view of the cache does not show, as a full ShareFetch's answer implies
    them: a full cache when it was refused for the limit, none otherwise (the least that explains it)."""
    return max_sessions if error == Error.SHARE_SESSION_LIMIT_REACHED else 0
