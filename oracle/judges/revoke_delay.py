"""Judge for `revoke-delay` traces: a KIP-983 consumer, or its coordinator's view of it (spec/revoke-delay.md).

Config `view` (optional, RD-12): "consumer" (the default), a trace the
consumer wrote; "coordinator", a trace the group coordinator wrote about one
member, which has no `poll` or `delay_revoke` (they happen inside the consumer).
"""

from __future__ import annotations

import re

from kipcheck.model.errors import Error
from kipcheck.model.revoke_delay import COORDINATOR, VIEWS, RevokeDelayConsumer
from kipcheck.oracle.judge import Judge, op
from kipcheck.oracle.trace import Malformed, Step

_TOPIC_PARTITION = re.compile(r"^.+:\d+$")


class RevokeDelayJudge(Judge):
    machine = "revoke-delay"
    config_defaults = {"view": "consumer"}

    def __init__(self, config: dict, profile: str) -> None:
        super().__init__(config, profile)
        if self.config["view"] not in VIEWS:
            raise Malformed(1, f"config 'view' must be one of {', '.join(VIEWS)}, found {self.config['view']!r}")
        self.model = RevokeDelayConsumer(view=self.config["view"])

    def _consumer_only(self, step: Step) -> None:
        if self.model.view == COORDINATOR:
            raise Malformed(step.line, f"op {step.op!r} happens inside the consumer: not in the coordinator's view")

    @staticmethod
    def _check_partitions(step: Step, where: str, partitions: list) -> list[str]:
        for partition in partitions:
            if not isinstance(partition, str) or not _TOPIC_PARTITION.match(partition):
                reason = f"{where} of {step.op!r} must name partitions as \"topic:partition\", found {partition!r}"
                raise Malformed(step.line, reason)
        return partitions

    def _partitions_arg(self, step: Step) -> list[str]:
        return self._check_partitions(step, "args.partitions", self.arg(step, "partitions", list))

    def _partitions_observed(self, step: Step, name: str) -> list[str] | None:
        partitions = self.observed(step, name, list)
        return None if partitions is None else self._check_partitions(step, f"observed.{name}", partitions)

    def _expect_set(self, clause: str, step: Step, name: str, expected: frozenset[str]) -> None:
        # The lists are sets: their order in a trace does not matter.
        observed = self._partitions_observed(step, name)
        self.expect(clause, name, sorted(expected), None if observed is None else sorted(set(observed)))

    @op(args=["partitions"])
    def op_assign(self, step: Step) -> None:
        self.model.assign(self._partitions_arg(step))

    @op(args=["partitions"])
    def op_revoke(self, step: Step) -> None:
        self.model.revoke(self._partitions_arg(step))

    @op(args=["partitions"])
    def op_lose(self, step: Step) -> None:
        self.model.lose(self._partitions_arg(step))

    @op(args=["partitions"])
    def op_release(self, step: Step) -> None:
        self.model.release(self._partitions_arg(step))

    @op(observed=["records_from", "to_be_revoked", "lost", "revoked"])
    def op_poll(self, step: Step) -> None:
        self._consumer_only(step)
        result = self.model.poll()
        self._expect_set("RD-3", step, "revoked", result.revoked)
        self._expect_set("RD-5", step, "lost", result.lost)
        self._expect_set("RD-8", step, "to_be_revoked", result.to_be_revoked)
        records_from = self._partitions_observed(step, "records_from")
        if records_from is not None:
            self.model.check_records_from(records_from)

    @op(args=["partitions"], observed=["result"])
    def op_delay_revoke(self, step: Step) -> None:
        self._consumer_only(step)
        self.expect("RD-9", "result", self.model.delay_revoke(self._partitions_arg(step)), self.observed(step, "result", bool))

    @op(args=["partition", "offset"], observed=["error"])
    def op_commit(self, step: Step) -> None:
        partition = self.arg(step, "partition", str)
        self._check_partitions(step, "args.partition", [partition])
        offset = self.arg(step, "offset", int)
        if offset < 0:
            raise Malformed(step.line, f"args.offset of 'commit' must be >= 0, found {offset}")
        observed = self.observed(step, "error", str)
        if observed == Error.ILLEGAL_GENERATION and self.model.commit_may_be_refused(partition):
            return  # RD-13: the coordinator already lost the partition for this consumer
        self.expect("RD-10", "error", self.model.commit(partition), observed)
