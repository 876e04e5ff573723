"""Judge for `ic` traces: individual commit offsets of one group and partition (spec/ic.md)."""

from __future__ import annotations

from typing import Any

from kipcheck.model.ic import ERROR_CLAUSES, NONE, IndividualCommit
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
        result = self.model.commit(self._ranges_arg(step, "ranges"))
        error = self.observed(step, "error", str)
        # A wrong error is judged by the clause of the error that should have been, or, when
        # the commit should have applied, by the clause of the error that was answered.
        clause = result.clause if result.error != NONE else ERROR_CLAUSES.get(error or NONE, "IC-2")
        self.expect(clause, "error", result.error, error)
        self.expect("IC-3", "stable_offset", result.stable_offset, self.observed(step, "stable_offset", int))
        self.expect("IC-2", "ranges", result.ranges, self._ranges_observed(step, "ranges"))
        self.expect("IC-4", "appends", result.appends, self.observed(step, "appends", list))

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
