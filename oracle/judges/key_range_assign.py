"""Judge for `key-range-assign` traces: the cooperative key-range assignor (spec/key-range-assign.md)."""

from __future__ import annotations

from typing import Any

from kipcheck.model.key_range_assign import Entry, Group, Member, validate
from kipcheck.oracle.judge import Judge, op
from kipcheck.oracle.trace import Malformed, Step


def _is_share(value: Any) -> bool:
    return value is None or (isinstance(value, list) and len(value) == 2 and all(type(bound) is int for bound in value))


class KeyRangeAssignJudge(Judge):
    machine = "key-range-assign"

    def _group(self, step: Step) -> Group:
        topics = self.arg(step, "topics", dict)
        if not all(type(count) is int and count >= 1 for count in topics.values()):
            raise Malformed(step.line, f"args.topics must map topic names to partition counts >= 1, found {topics!r}")
        members = self.arg(step, "members", dict)
        members = {member: self._member(step, member, info, topics) for member, info in members.items()}
        allows = self.arg(step, "topic_allows_key_share", dict, {})
        if not all(type(value) is bool for value in allows.values()):
            raise Malformed(step.line, f"args.topic_allows_key_share must map topic names to booleans, found {allows!r}")
        return Group(topics, members, allows, self.arg(step, "coordinator_allows_ic", bool, True))

    @staticmethod
    def _member(step: Step, member: str, info: Any, topics: dict) -> Member:
        shaped = isinstance(info, dict) and isinstance(info.get("topics"), list) and type(info.get("allow_key_share")) is bool
        if not shaped:
            expected = '{"topics": [...], "allow_key_share": bool}'
            raise Malformed(step.line, f"args.members.{member} must be {expected}, found {info!r}")
        unknown = [topic for topic in info["topics"] if topic not in topics]
        if unknown:
            raise Malformed(step.line, f"args.members.{member} subscribes to topics not in args.topics: {unknown!r}")
        return Member(frozenset(info["topics"]), info["allow_key_share"])

    @staticmethod
    def _entries(step: Step, member: str, entries: Any) -> list[Entry]:
        shaped = isinstance(entries, list) and all(
            isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
            and type(entry[1]) is int and _is_share(entry[2])
            for entry in entries
        )
        if not shaped:
            expected = "a list of [topic, partition, [lo, hi] or null]"
            raise Malformed(step.line, f"observed.assignment.{member} must be {expected}, found {entries!r}")
        return [(topic, partition, None if share is None else tuple(share)) for topic, partition, share in entries]

    @op(args=["topics", "members", "topic_allows_key_share", "coordinator_allows_ic"], observed=["assignment"],
        objects={"args.members": ["topics", "allow_key_share"]})
    def op_assign(self, step: Step) -> None:
        group = self._group(step)
        assignment = self.observed(step, "assignment", dict)
        if assignment is not None:
            validate(group, {member: self._entries(step, member, entries) for member, entries in assignment.items()})
