"""Judge for `expansion` traces (KIP-287)."""

from __future__ import annotations

from kipcheck.model.expansion import Expansion
from kipcheck.model.violation import Violation
from kipcheck.oracle.judge import Judge, op
from kipcheck.oracle.trace import Malformed, Step


class ExpansionJudge(Judge):
    machine = "expansion"
    config_defaults = {"initial_partitions": 1, "initial_processors": 1}

    def __init__(self, config: dict, profile: str) -> None:
        super().__init__(config, profile)
        try:
            self.model = Expansion.start(self.config["initial_partitions"], self.config["initial_processors"])
        except Violation as violation:
            raise Malformed(1, f"config breaks {violation.clause}: {violation.allowed}") from None

    def _count(self, step: Step) -> int:
        count = self.arg(step, "count", int)
        if count < 1:
            raise Malformed(step.line, f"args.count must be >= 1, found {count}")
        return count

    @op(args=["count"])
    def op_expand_partitions(self, step: Step) -> None:
        self.model.expand_partitions(self._count(step))

    @op(args=["count"])
    def op_expand_processors(self, step: Step) -> None:
        self.model.expand_processors(self._count(step))

    @op(args=["key_hash"], observed=["partition", "processor"])
    def op_route(self, step: Step) -> None:
        key_hash = self.arg(step, "key_hash", int)
        if key_hash < 0:
            raise Malformed(step.line, f"args.key_hash must be >= 0, found {key_hash}")
        partition = self.model.partition_of(key_hash)
        self.expect("EX-2", "partition", partition, self.observed(step, "partition", int))
        self.expect("EX-2", "processor", self.model.processor_of(partition), self.observed(step, "processor", int))
