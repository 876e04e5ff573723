"""CoordinatorTraces: the KIP-848 coordinator's revoke-delay traces, one per (group, member), in its view.

    traces = CoordinatorTraces(trace_dir)
    traces.reconciled(group_id, before, after, reported, now_ms)   # a heartbeat (reported: its owned partitions)
    traces.ended(group_id, member, now_ms, lost=True)    # fenced (lose) or left (release)
    traces.committed(group_id, member_id, {(topic, partition): offset}, now_ms)
    traces.close()

What the coordinator asked of each member and heard from it, so that the
oracle judges every member, real clients included, and a test can check that
a KIP-983 consumer's own trace agrees (spec/revoke-delay.md RD-12, "Who writes
which trace"): a partition pending revocation that a heartbeat no longer
reports owned was released by the member (its acknowledgement, written when
first heard, also when the coordinator still waits for the member's other
revocations), as is one that leaves the member's state otherwise; partitions
newly pending revocation were revoked, newly assigned ones assigned; a fenced
member loses everything it held, a leaving one releases it; each partition of an OffsetCommit accepted from the member is a
commit step. Files are written only when the broker has a trace dir.
"""

from __future__ import annotations

from pathlib import Path

from kipcheck.impl.consumer.tracing import COORDINATOR_ACTOR, open_revoke_delay_trace, partition_names
from kipcheck.impl.groups.consumer_group import ConsumerMember
from kipcheck.impl.share.tracing import Trace
from kipcheck.impl.storage import Storage


def _held(assignment: dict[str, frozenset[int]]) -> set[str]:
    return {f"{topic}:{partition}" for topic, partitions in assignment.items() for partition in partitions}


class CoordinatorTraces:
    def __init__(self, directory: str | Path, storage: Storage | None = None):
        self.directory = Path(directory)
        self._storage = storage
        self._traces: dict[tuple[str, str], Trace] = {}
        self._released: dict[tuple[str, str], set[str]] = {}  # acknowledged, still pending at the coordinator

    def _trace(self, group_id: str, member_id: str) -> Trace:
        key = (group_id, member_id)
        if key not in self._traces:
            self._traces[key] = open_revoke_delay_trace(self.directory, "coordinator", group_id, member_id,
                                                                self._storage)
        return self._traces[key]

    def reconciled(self, group_id: str, before: ConsumerMember, after: ConsumerMember,
                   reported: dict[str, frozenset[int]] | None, at_ms: int) -> None:
        key, pending = (group_id, after.member_id), _held(before.pending_revocation)
        acknowledged = set() if reported is None else pending - _held(reported)
        gone = (_held(before.assigned) | pending) - (_held(after.assigned) | _held(after.pending_revocation))
        already = self._released.pop(key, set())
        still_pending = (already | acknowledged) & _held(after.pending_revocation)
        if still_pending:
            self._released[key] = still_pending
        steps = ((after.member_id, "release", (acknowledged | gone) - already),
                 (COORDINATOR_ACTOR, "revoke", _held(after.pending_revocation) - _held(before.pending_revocation)),
                 (COORDINATOR_ACTOR, "assign", _held(after.assigned) - _held(before.assigned)))
        for actor, op, partitions in steps:
            if partitions:
                self._trace(group_id, after.member_id).step(at_ms, actor, op, {"partitions": partition_names(partitions)})

    def ended(self, group_id: str, member: ConsumerMember, at_ms: int, lost: bool) -> None:
        held = _held(member.assigned) | _held(member.pending_revocation)
        held -= self._released.pop((group_id, member.member_id), set())
        if held:
            actor, op = (COORDINATOR_ACTOR, "lose") if lost else (member.member_id, "release")
            self._trace(group_id, member.member_id).step(at_ms, actor, op, {"partitions": partition_names(held)})

    def committed(self, group_id: str, member_id: str, offsets: dict[tuple[str, int], int], at_ms: int) -> None:
        trace = self._trace(group_id, member_id)
        for (topic, partition), offset in sorted(offsets.items()):
            if offset < 0:
                continue  # not a position (Kafka stores it; a trace offset is one)
            trace.step(at_ms, member_id, "commit", {"partition": f"{topic}:{partition}", "offset": offset},
                       {"error": "NONE"})

    def close(self) -> None:
        for trace in self._traces.values():
            trace.close()
        self._traces.clear()
