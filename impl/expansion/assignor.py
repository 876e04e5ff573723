"""Who holds which partition of a KIP-287 job, and when partitions move (spec/expansion.md EX-2, EX-8 to EX-11).

    moves = next_moves(job, holders, committed, members, joining, ready)
    moves.revoke    # {partition: processor}: release it (commit T1 and stop), a new processor is ready for it
    moves.assign    # {partition: (processor, offset)}: hold it, output from offset (its committed offset, T1)

Pure: the group that runs the job (in one process, or a group coordinator's
assignor, server- or client-side) keeps the state and calls this after every
change. A partition goes to linear hashing's processor over N0 (EX-2): at
the start, after a partition expansion (the source's processor: no key
moves), and from an old processor to a new one only once that one is ready
(EX-10) and the old one released it (EX-8); always at its committed offset
(EX-11).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping

from kipcheck.impl.expansion.job import JobRecord
from kipcheck.model.expansion import linear_hash


@dataclass
class Moves:
    revoke: dict[int, int] = field(default_factory=dict)
    assign: dict[int, tuple[int, int]] = field(default_factory=dict)


def target(job: JobRecord, partition: int) -> int:
    """The processor a partition belongs to (EX-2)."""
    return linear_hash(partition, job.processors, job.initial)


def gaining_processors(before: JobRecord, after: JobRecord) -> set[int]:
    """The processors an expansion hands partitions they did not hold: with linear hashing, the new ones (EX-9)."""
    return {target(after, partition) for partition in range(before.partitions)
            if target(after, partition) != target(before, partition)}


def next_moves(job: JobRecord, holders: Mapping[int, int], committed: Mapping[int, int], members: Collection[int],
               joining: Collection[int], ready: Collection[int]) -> Moves:
    """`holders`: partition -> its processor; `committed`: partition -> committed offset; `members`: processors
    running; `joining`: new processors not yet handed all their partitions; `ready`: those that said ready."""
    moves = Moves()
    for partition in range(job.partitions):
        processor, holder = target(job, partition), holders.get(partition)
        if processor not in members or holder == processor:
            continue
        if processor in joining and processor not in ready:
            continue  # EX-10: a new processor gets nothing before it is almost caught up
        if holder is not None:
            moves.revoke[partition] = holder  # EX-8: the old holder releases first
        else:
            moves.assign[partition] = (processor, committed.get(partition, 0))  # EX-11: output from T1
    return moves
