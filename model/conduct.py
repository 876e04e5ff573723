"""A client's conduct: what it may send, given what it was answered (spec: SP-85, SS-40, IC-22).

The other models judge a broker: whatever a client sends, they say what the broker must answer. A client
can be wrong too, and a correct broker's answer hides it (a record acknowledged that was never delivered is
refused, and the application never learns that it processed a record it never had). These rules judge the
client, from what it was seen to be given. They are judged only where a trace says so (the header's
`conduct`): a probe that sends wrong requests on purpose writes none.

    given = Given()
    given.give("c1", 0, 9)                       # records 0..9 delivered to c1 (acquired, or fetched)
    given.check("SP-85", "c1", [(0, 4)], "acknowledged")   # raises Violation for an offset never given
    given.take_back("c1", 0, 4)                  # finally acknowledged: giving it again is needed to use it again
    session_epoch_violation(cached_epoch=3, epoch=2)        # SS-40: a stale epoch

Offsets are kept as merged ranges per client, so memory follows the gaps, not the records.
"""

from __future__ import annotations

from typing import Iterable

from kipcheck.model.ranges import Range, merge, subtract
from kipcheck.model.violation import Violation

OPEN_EPOCH, CLOSE_EPOCH = 0, -1


class Given:
    """The offsets each client was given (and has not given back)."""

    def __init__(self) -> None:
        self.by_client: dict[str, tuple[Range, ...]] = {}

    def give(self, client: str, first: int, last: int) -> None:
        self.by_client[client] = merge([*self.by_client.get(client, ()), (first, last)])

    def take_back(self, client: str, first: int, last: int) -> None:
        kept = subtract(self.by_client.get(client, ()), [(first, last)])
        if kept:
            self.by_client[client] = kept
        else:
            self.by_client.pop(client, None)

    def missing(self, client: str, ranges: Iterable[Range]) -> tuple[Range, ...]:
        """The offsets of `ranges` the client was not given."""
        return subtract(merge(ranges), self.by_client.get(client, ()))

    def check(self, clause: str, client: str, ranges: Iterable[Range], verb: str) -> None:
        """SP-85 (acknowledged) and IC-22 (committed): a client uses only offsets it was given."""
        missing = self.missing(client, ranges)
        if missing:
            given = [list(pair) for pair in self.by_client.get(client, ())]
            raise Violation(clause, f"{verb} only offsets given to {client}: {given}",
                            f"{verb} {[list(pair) for pair in missing]}, never given to it")


def session_epoch_violation(cached_epoch: int | None, epoch: int) -> Violation | None:
    """SS-40: a client with a session sends its session's epoch, or 0 (open anew), or -1 (close). A client
    without one (as far as the trace shows) is not judged: the broker may have ended its session unseen."""
    if cached_epoch is None or epoch in (OPEN_EPOCH, CLOSE_EPOCH, cached_epoch):
        return None
    which = "stale" if epoch < cached_epoch else "future"
    return Violation("SS-40", f"epoch {cached_epoch} (its session's), 0 or -1",
                     f"epoch {epoch}, a {which} one")
