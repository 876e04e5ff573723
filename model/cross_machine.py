"""Rules that span machines: what a share-partition reloads after its broker restarts (spec/cross-machine.md).

    reloaded = reloaded_window(spso, snapshot)   # XM-1: the initial_state a restarted partition starts from

`snapshot` is a share-partition's window before the restart, as runs
[first, last, state, delivery_count] (SharePartition.snapshot()). Pure: the
conformance runner uses it to write the trace of the partition after a
restart it caused, so what the partition persisted (share-state) and what the
restarted partition serves (share-partition) are judged as one rule.
"""

from __future__ import annotations

from typing import Sequence

AVAILABLE, ACQUIRED = "available", "acquired"


def reloaded_window(snapshot: Sequence[Sequence]) -> list[list]:
    """XM-1: the runs a restarted share-partition reloads, for the trace's config.initial_state.

    Every transition out of acquired is persisted before it is answered, and an acquisition never is
    (ST-15), so an acquired record comes back available with the count of its last persisted
    transition: one less than the acquisition gave it. Records at the end of the window that were
    never transitioned (available, count 0) were never persisted either: they are past the reloaded
    SPEO, new records of the log again."""
    runs = [[first, last, AVAILABLE, count - 1] if state == ACQUIRED else [first, last, state, count]
            for first, last, state, count in snapshot]
    while runs and runs[-1][2] == AVAILABLE and runs[-1][3] == 0:
        runs.pop()
    return runs
