"""Judge for `ic` traces: individual commit offsets of one group and partition (spec/ic.md)."""

from __future__ import annotations

from typing import Any

from kipcheck.model.errors import Error
from kipcheck.model.ic import ERROR_CLAUSES, IndividualCommit
from kipcheck.model.key_handoff import KeyHandoff
from kipcheck.model.key_hash import HASH_MAX
from kipcheck.model.violation import Violation
from kipcheck.oracle.judge import Judge, op
from kipcheck.oracle.trace import Malformed, Step


def _is_pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(type(number) is int for number in value)


class IcJudge(Judge):
    machine = "ic"
    config_defaults = {"max_ranges": 10_000, "accept_individual_commit": True}

    def __init__(self, config: dict, profile: str) -> None:
        super().__init__(config, profile)
        if self.config["max_ranges"] < 0:
            raise Malformed(1, f"config 'max_ranges' must be >= 0, found {self.config['max_ranges']}")
        self.model = IndividualCommit(self.config["max_ranges"], self.config["accept_individual_commit"])
        self.handoff = KeyHandoff()

    def _ranges_arg(self, step: Step, name: str) -> list[list[int]]:
        ranges = self.arg(step, name, list)
        if not all(_is_pair(pair) for pair in ranges):
            raise Malformed(step.line, f"args.{name} of {step.op!r} must be a list of [first, last] integer pairs")
        return ranges

    def _ranges_observed(self, step: Step, name: str) -> list | None:
        ranges = self.observed(step, name, list)
        if ranges is not None and not all(_is_pair(pair) for pair in ranges):
            raise Malformed(step.line, f"observed.{name} of {step.op!r} must be a list of [first, last] integer pairs")
        return ranges

    @op(args=["ranges"], observed=["error", "stable_offset", "ranges", "appends"],
        objects={"observed.appends": ["log", "put", "tombstone", "stable_offset"]})
    def op_commit(self, step: Step) -> None:
        ranges = self._ranges_arg(step, "ranges")
        self.handoff.commit(step.actor, ranges)
        error = self.observed(step, "error", str)
        # IC-13: a commit the coordinator could not write is refused and changes nothing.
        result = self.model.unwritten() if error == Error.NOT_COORDINATOR else self.model.commit(ranges)
        self.handoff.forget(self.model.committed)
        # A wrong error is judged by the clause of the error that should have been, or, when
        # the commit should have applied, by the clause of the error that was answered.
        clause = result.clause if result.error != Error.NONE else ERROR_CLAUSES.get(error or Error.NONE, "IC-2")
        self.expect(clause, "error", result.error, error)
        unwritten = error == Error.NOT_COORDINATOR
        self.expect("IC-13" if unwritten else "IC-3", "stable_offset", result.stable_offset,
                    self.observed(step, "stable_offset", int))
        self.expect("IC-13" if unwritten else "IC-2", "ranges", result.ranges, self._ranges_observed(step, "ranges"))
        self.expect("IC-13" if unwritten else "IC-4", "appends", result.appends, self.observed(step, "appends", list))

    @op(observed=["stable_offset", "ranges"])
    def op_fetch(self, step: Step) -> None:
        stable_offset, ranges = self.model.fetch()
        self.expect("IC-9", "stable_offset", stable_offset, self.observed(step, "stable_offset", int))
        self.expect("IC-9", "ranges", ranges, self._ranges_observed(step, "ranges"))

    @op(args=["fetched", "processed"], observed=["commit"])
    def op_amend(self, step: Step) -> None:
        fetched = self.arg(step, "fetched", list)
        if not _is_pair(fetched) or fetched[0] > fetched[1]:
            raise Malformed(step.line, f"args.fetched of 'amend' must be one [first, last] range, found {fetched!r}")
        processed = self._ranges_arg(step, "processed")
        if any(first > last for first, last in processed):
            raise Malformed(step.line, f"args.processed of 'amend' has a backwards range: {processed!r}")
        commit = self.model.amend(fetched, processed)
        self.expect("IC-11", "commit", commit, self._ranges_observed(step, "commit"))

    @op(observed=["stable_offset", "ranges"])
    def op_replay(self, step: Step) -> None:
        """The coordinator restarted and rebuilt its state from its logs (IC-12)."""
        stable_offset = self.observed(step, "stable_offset", int)
        ranges = self._ranges_observed(step, "ranges")
        if stable_offset is None or ranges is None:
            raise Malformed(step.line, "'replay' needs observed.stable_offset and observed.ranges")
        reason = self.model.restart(stable_offset, ranges)
        if reason is not None:
            allowed = f"every committed offset kept: stable_offset={self.model.stable_offset}, ranges={self.model.fetch()[1]}"
            raise Violation("IC-12", allowed, f"{reason}: stable_offset={stable_offset}, ranges={ranges}")

    @op(args=["ranges"])
    def op_own(self, step: Step) -> None:
        """The actor's key-hash ranges of the partition from now on (IC-15)."""
        ranges = self._ranges_arg(step, "ranges")
        if any(not 0 <= low <= high <= HASH_MAX for low, high in ranges):
            raise Malformed(step.line, f"args.ranges of 'own' must lie within [0, {HASH_MAX}], found {ranges!r}")
        self.handoff.own(step.actor, ranges)

    @op(args=["records"])
    def op_deliver(self, step: Step) -> None:
        """Records [offset, key_hash] the actor's poll returned (IC-10, IC-14)."""
        records = self.arg(step, "records", list)
        if not all(_is_pair(record) and record[0] >= 0 and 0 <= record[1] <= HASH_MAX for record in records):
            raise Malformed(step.line, f"args.records of 'deliver' must be [offset, key_hash] pairs, found {records!r}")
        self.handoff.deliver(step.actor, records, self.model.committed)

    @op(args=["ranges"])
    def op_drop(self, step: Step) -> None:
        """Processed offsets the actor leaves uncommitted because it gave their records up (IC-16)."""
        ranges = self._ranges_arg(step, "ranges")
        if any(not 0 <= first <= last for first, last in ranges):
            raise Malformed(step.line, f"args.ranges of 'drop' must be [first, last], 0 <= first <= last: {ranges!r}")
        self.handoff.drop(step.actor, ranges, self.model.uncommitted)
