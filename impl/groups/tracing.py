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

In a group whose assignor is `key-range-round-robin` (spec/key-range-assign.md
"Who writes which trace") it also writes, in its view:
- `key-range-assign.coordinator.<group>.jsonl`: one `assign` step for each
  assignment the assignor computes, with the assignor's input, judged by
  KR-1 to KR-7 (`traces.assigned(group_id, model_group, target, now_ms)`);
- `ic-coordinator.<group>:<topic>:<partition>.jsonl`: an `own` step of a
  member whenever the key ranges it holds of the partition (assigned or
  pending revocation) change, `[]` once it released them, left or was fenced,
  judged by IC-15: no key hash is held by two members at once.
The revoke-delay traces carry whole partitions only: a key share is not a
partition (KIP-983 revokes partitions), so giving a whole partition up for a
share of it is traced as its revocation.
"""

from __future__ import annotations

from pathlib import Path

from kipcheck.impl.groups.assignors import Assignment, key_range_of, model_entries, partition_of
from kipcheck.impl.groups.consumer_group import ConsumerMember
from kipcheck.impl.storage import Storage
from kipcheck.impl.tracing import (
    COORDINATOR_ACTOR, Trace, open_new_trace, open_revoke_delay_trace, partition_names, quoted_name, safe_name)
from kipcheck.model import key_range_assign
from kipcheck.model.errors import Error
from kipcheck.model.ic import merge


def _held(assignment: Assignment) -> set[str]:
    """The whole partitions of an assignment (key shares are not KIP-983's partitions)."""
    return {f"{topic}:{unit}" for topic, units in assignment.items() for unit in units if isinstance(unit, int)}


def key_ranges(member: ConsumerMember) -> dict[tuple[str, int], list[list[int]]]:
    """(topic, partition) -> the key ranges the member holds of it, assigned or pending revocation, merged."""
    held: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for assignment in (member.assigned, member.pending_revocation):
        for topic, units in assignment.items():
            for unit in units:
                held.setdefault((topic, partition_of(unit)), []).append(key_range_of(unit))
    return {key: [list(pair) for pair in merge(ranges)] for key, ranges in held.items()}


class CoordinatorTraces:
    def __init__(self, directory: str | Path, storage: Storage | None = None):
        self.directory = Path(directory)
        self._storage = storage
        self._traces: dict[tuple[str, str], Trace] = {}
        self._released: dict[tuple[str, str], set[str]] = {}  # acknowledged, still pending at the coordinator
        self._assign_traces: dict[str, Trace] = {}
        self._own_traces: dict[tuple[str, str, int], Trace] = {}

    def _trace(self, group_id: str, member_id: str) -> Trace:
        key = (group_id, member_id)
        if key not in self._traces:
            self._traces[key] = open_revoke_delay_trace(self.directory, "coordinator", group_id, member_id,
                                                                self._storage)
        return self._traces[key]

    def reconciled(self, group_id: str, before: ConsumerMember, after: ConsumerMember,
                   reported: Assignment | None, at_ms: int, key_shares: bool = False) -> None:
        if key_shares:
            self._owned(group_id, after.member_id, key_ranges(before), key_ranges(after), at_ms)
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

    def ended(self, group_id: str, member: ConsumerMember, at_ms: int, lost: bool, key_shares: bool = False) -> None:
        if key_shares:
            self._owned(group_id, member.member_id, key_ranges(member), {}, at_ms)
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
                       {"error": Error.NONE})

    def assigned(self, group_id: str, group: key_range_assign.Group, target: dict[str, Assignment],
                 at_ms: int) -> None:
        """A key-range-assign `assign` step: the assignor's input and the assignment it computed."""
        trace = self._assign_traces.get(group_id)
        if trace is None:
            trace = self._assign_traces[group_id] = open_new_trace(
                self.directory, f"key-range-assign.coordinator.{safe_name(group_id)}",
                {"machine": "key-range-assign", "config": {}}, self._storage)
        args = {"topics": dict(sorted(group.topics.items())),
                "members": {member_id: {"topics": sorted(info.topics), "allow_key_share": info.allow_key_share}
                            for member_id, info in sorted(group.members.items())},
                "topic_allows_key_share": dict(sorted(group.topic_allows_key_share.items())),
                "coordinator_allows_ic": group.coordinator_allows_ic}
        assignment = {member_id: [[topic, partition, None if share is None else list(share)]
                                  for topic, partition, share in entries]
                      for member_id, entries in sorted(model_entries(target).items())}
        trace.step(at_ms, COORDINATOR_ACTOR, "assign", args, {"assignment": assignment})

    def _owned(self, group_id: str, member_id: str, before: dict, after: dict, at_ms: int) -> None:
        for topic, partition in sorted(set(before) | set(after)):
            ranges = after.get((topic, partition), [])
            if ranges == before.get((topic, partition), []):
                continue
            key = (group_id, topic, partition)
            if key not in self._own_traces:
                name = quoted_name(f"{group_id}:{topic}:{partition}")
                self._own_traces[key] = open_new_trace(self.directory, f"ic-coordinator.{name}",
                                                       {"machine": "ic", "config": {}}, self._storage)
            self._own_traces[key].step(at_ms, member_id, "own", {"ranges": ranges})

    def close(self) -> None:
        for trace in (*self._traces.values(), *self._assign_traces.values(), *self._own_traces.values()):
            trace.close()
        self._traces.clear()
        self._assign_traces.clear()
        self._own_traces.clear()
