"""A share-session trace of some of a broker's sessions (SS-41) and/or judged for the members' conduct (SS-40)."""

from __future__ import annotations

from kipcheck.model.conduct import session_epoch_violation
from kipcheck.model.partial_view import unseen_sessions
from kipcheck.oracle.judge import Judge
from kipcheck.oracle.judges.share_session import ShareSessionJudge
from kipcheck.oracle.trace import Header, Step
from kipcheck.oracle.views import declared_as


def judge(header: Header, reference: bool) -> Judge:
    return ShareSessionViewJudge(header.config, header.profile, header.view == "partial", header.conduct)


class ShareSessionViewJudge(ShareSessionJudge):
    """A share-session trace of some of a broker's sessions (SS-41: a full fetch may find the cache full of
    sessions the trace does not show) and/or judged for the members' conduct (SS-40: the epochs they send)."""

    def __init__(self, config: dict, profile: str, partial: bool, conduct: bool) -> None:
        super().__init__(config, profile)
        self.partial, self.conduct = partial, conduct

    @declared_as(ShareSessionJudge.op_share_fetch)
    def op_share_fetch(self, step: Step) -> None:
        self._judge_epoch(step)
        super().op_share_fetch(step)

    @declared_as(ShareSessionJudge.op_share_acknowledge)
    def op_share_acknowledge(self, step: Step) -> None:
        self._judge_epoch(step)
        super().op_share_acknowledge(step)

    def _judge_epoch(self, step: Step) -> None:
        if self.conduct:
            session = self.model.by_member.get(step.actor)
            violation = session_epoch_violation(None if session is None else session.epoch,
                                                self.arg(step, "epoch", int))
            if violation is not None:
                raise violation

    def _other_sessions(self, step: Step) -> int:
        """SS-41: in a partial view, a full fetch refused for the session limit found the cache full of
        sessions the trace does not show; any other answer is judged as if there were none."""
        if self.partial:
            return unseen_sessions(self.config["max_sessions"], self.observed(step, "error", str))
        return super()._other_sessions(step)
