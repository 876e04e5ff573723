"""Judge for `share-session` traces (KIP-932 share session cache of one broker)."""

from __future__ import annotations

from typing import Any

from kipcheck.model.errors import Error
from kipcheck.model.profiles import PROFILES, is_kafka
from kipcheck.model.share_session import Answer, ShareSessionCache
from kipcheck.model.violation import STORAGE_ERRORS
from kipcheck.oracle.judge import Judge, op
from kipcheck.oracle.trace import Malformed, Step

ACK_FIELDS = {"tp": str, "first": int, "last": int, "type": str}


class ShareSessionJudge(Judge):
    machine = "share-session"
    config_defaults = {"max_sessions": 2000}
    profiles = PROFILES

    def __init__(self, config: dict, profile: str) -> None:
        super().__init__(config, profile)
        if self.config["max_sessions"] < 0:
            raise Malformed(1, f"config 'max_sessions' must be >= 0, found {self.config['max_sessions']}")
        self.model = ShareSessionCache(self.profile, self.config["max_sessions"])

    @op(args=["epoch", "add", "forget", "acks"], observed=["error", "other_sessions", "released"],
        objects={"args.acks": ACK_FIELDS})
    def op_share_fetch(self, step: Step) -> None:
        epoch, add, forget = self.arg(step, "epoch", int), self._partitions(step, "add"), self._partitions(step, "forget")
        has_acks, other_sessions = bool(self._acks(step)), self._other_sessions(step)
        if not self._failed_on_storage(step) and not self._threw(step, epoch, has_acks):
            answer = self.model.share_fetch(step.actor, epoch, add, forget, has_acks, other_sessions)
            self._expect_error(step, answer)
            self._expect_released(step, answer)

    @op(args=["epoch", "acks"], observed=["error", "released"], objects={"args.acks": ACK_FIELDS})
    def op_share_acknowledge(self, step: Step) -> None:
        has_acks, epoch = bool(self._acks(step)), self.arg(step, "epoch", int)
        if not self._failed_on_storage(step) and not self._threw(step, epoch, has_acks):
            answer = self.model.share_acknowledge(step.actor, epoch)
            self._expect_error(step, answer)
            self._expect_released(step, answer)

    @op(observed=["released", "group_empty"])
    def op_disconnect(self, step: Step) -> None:
        answer = self.model.disconnect(step.actor)
        self._expect_released(step, answer)
        if is_kafka(self.profile):  # SS-31
            self.expect("SS-31", "group_empty", answer.group_empty, self.observed(step, "group_empty", bool))

    def _expect_released(self, step: Step, answer: Answer) -> None:
        """SS-30 (the Kafka profiles; a trace format extension): the topic-partitions the member's records were
        released in."""
        observed = self.observed(step, "released", list)
        if observed is None or not is_kafka(self.profile):
            return
        if not all(isinstance(partition, str) for partition in observed):
            raise Malformed(step.line, f'observed.released must list "topic:partition" strings, found {observed!r}')
        expected = sorted(answer.released) if answer.error == Error.NONE and answer.releases else []
        self.expect("SS-30", "released", expected, sorted(observed))

    @op(observed=["sessions"])
    def op_check(self, step: Step) -> None:
        observed = self.observed(step, "sessions", dict)
        if observed is not None and not all(type(epoch) is int for epoch in observed.values()):
            raise Malformed(step.line, f"observed.sessions must map members to integer epochs, found {observed!r}")
        sessions = self.model.sessions()
        self.expect(sessions.clause, "sessions", sessions.value, observed)

    def _failed_on_storage(self, step: Step) -> bool:
        """True when the request was refused with a storage error (allowed, changing nothing: SS-18)."""
        error = self.observed(step, "error", str)
        if error not in STORAGE_ERRORS:
            return False
        self.model.storage_failure(error)
        return True

    def _threw(self, step: Step, epoch: int, has_acks: bool) -> bool:
        """True when the request's acknowledgements threw where the profile allows it (SS-32): judged so."""
        if not (has_acks and epoch != 0 and self.model.rules.acknowledgements_throw
                and self.observed(step, "error", str) == Error.UNKNOWN_SERVER_ERROR):
            return False
        self._expect_error(step, self.model.acknowledgement_threw(step.actor, epoch))
        return True

    def _other_sessions(self, step: Step) -> int:
        """SS-5: other groups' sessions in the broker's cache (a trace format extension; left out: none)."""
        other_sessions = self.observed(step, "other_sessions", int)
        if other_sessions is not None and other_sessions < 0:
            raise Malformed(step.line, f"observed.other_sessions of 'share_fetch' must be >= 0, found {other_sessions}")
        return other_sessions or 0

    def _expect_error(self, step: Step, answer: Answer) -> None:
        observed = self.observed(step, "error", str)
        clause = answer.clause
        if observed == Error.SHARE_SESSION_LIMIT_REACHED and answer.error == Error.NONE and is_kafka(self.profile):
            clause = "SS-5"  # the rule that says when the limit refuses: the cache had room
        self.expect(clause, "error", answer.error, observed)

    def _partitions(self, step: Step, name: str) -> list[str]:
        partitions = self.arg(step, name, list, [])
        for partition in partitions:
            topic, _, number = partition.partition(":") if isinstance(partition, str) else ("", "", "")
            if not topic or not number.isdigit():
                raise Malformed(step.line, f'args.{name} must list "topic:partition" strings, found {partition!r}')
        return partitions

    def _acks(self, step: Step) -> list[dict[str, Any]]:
        acks = self.arg(step, "acks", list, [])
        for ack in acks:
            if not isinstance(ack, dict) or any(not _typed(ack.get(key), kind) for key, kind in ACK_FIELDS.items()):
                raise Malformed(step.line, f"args.acks entries must be {{tp, first, last, type}}, found {ack!r}")
        return acks


def _typed(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and type(value) is not bool
