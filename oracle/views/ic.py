"""An ic trace written by an observer of the consumers, judged for their conduct (IC-22)."""

from __future__ import annotations

from kipcheck.model.conduct import Given
from kipcheck.oracle.judge import Judge
from kipcheck.oracle.judges.ic import IcJudge
from kipcheck.oracle.trace import Header, Malformed, Step
from kipcheck.oracle.views import declared_as


def judge(header: Header, reference: bool) -> Judge:
    return IcConductJudge(header.config, header.profile)


class IcConductJudge(IcJudge):
    """An ic trace written by an observer of the consumers: with `fetched` steps, judged for IC-22."""

    def __init__(self, config: dict, profile: str) -> None:
        super().__init__(config, profile)
        self.given = Given()

    def op_fetched(self, step: Step) -> None:
        """Offsets a fetch answered the actor with (IC-22)."""
        for first, last in self._ranges_arg(step, "ranges"):
            if not 0 <= first <= last:
                raise Malformed(step.line, "args.ranges of 'fetched' must be [first, last] with 0 <= first <= last")
            self.given.give(step.actor, first, last)

    op_fetched.fields = IcJudge.op_own.fields

    @declared_as(IcJudge.op_commit)
    def op_commit(self, step: Step) -> None:
        ranges = self._ranges_arg(step, "ranges")
        # IC-22: a member commits only offsets it was answered with.
        self.given.check("IC-22", step.actor, [tuple(pair) for pair in ranges], "committed")
        super().op_commit(step)
