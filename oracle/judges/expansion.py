"""Judge for `expansion` traces (KIP-287): routing, and the job's processors (spec/expansion.md)."""

from __future__ import annotations

from kipcheck.model.expansion import CATCH_UP_LAG_MAX, GROUP, PROCESS, PROCESSORS, REBUILD, SKIP, VIEWS, Expansion
from kipcheck.model.violation import Violation
from kipcheck.oracle.judge import Judge, op
from kipcheck.oracle.trace import Malformed, Step

_RECORD = ["processor", "partition", "offset", "key_hash"]
_HANDOVER = ["processor", "partition", "offset"]


class ExpansionJudge(Judge):
    machine = "expansion"
    config_defaults = {"initial_partitions": 1, "initial_processors": 1, "catch_up_lag_max": CATCH_UP_LAG_MAX,
                       "view": PROCESSORS}

    def __init__(self, config: dict, profile: str) -> None:
        super().__init__(config, profile)
        if self.config["catch_up_lag_max"] < 0:
            raise Malformed(1, f"config 'catch_up_lag_max' must be >= 0, found {self.config['catch_up_lag_max']}")
        if self.config["view"] not in VIEWS:
            raise Malformed(1, f"config 'view' must be one of {', '.join(VIEWS)}, found {self.config['view']!r}")
        try:
            self.model = Expansion.start(self.config["initial_partitions"], self.config["initial_processors"],
                                         self.config["catch_up_lag_max"], self.config["view"])
        except Violation as violation:
            raise Malformed(1, f"config breaks {violation.clause}: {violation.allowed}") from None

    def _count(self, step: Step) -> int:
        count = self.arg(step, "count", int)
        if count < 1:
            raise Malformed(step.line, f"args.count must be >= 1, found {count}")
        return count

    def _natural(self, step: Step, name: str) -> int:
        value = self.arg(step, name, int)
        if value < 0:
            raise Malformed(step.line, f"args.{name} must be >= 0, found {value}")
        return value

    def _naturals(self, step: Step, names: list[str]) -> list[int]:
        return [self._natural(step, name) for name in names]

    @op(args=["count"], observed=["splits"], objects={"observed.splits": ["partition", "source", "offset"]})
    def op_expand_partitions(self, step: Step) -> None:
        self.model.expand_partitions(self._count(step), self._splits(step))

    def _splits(self, step: Step) -> list[tuple[int, int, int]] | None:
        splits = self.observed(step, "splits", list)
        if splits is None:
            return None
        found = []
        for split in splits:
            fields = ("partition", "source", "offset")
            values = [split.get(name) if isinstance(split, dict) else None for name in fields]
            if any(type(value) is not int or value < 0 for value in values):
                raise Malformed(step.line, "observed.splits must hold {partition, source, offset} objects of "
                                           f"integers >= 0, found {split!r}")
            found.append(tuple(values))
        return found

    @op(args=["count"])
    def op_expand_processors(self, step: Step) -> None:
        self.model.expand_processors(self._count(step))

    @op(args=["key_hash"], observed=["partition", "processor"])
    def op_route(self, step: Step) -> None:
        key_hash = self._natural(step, "key_hash")
        partition = self.model.partition_of(key_hash)
        self.expect("EX-2", "partition", partition, self.observed(step, "partition", int))
        self.expect("EX-2", "processor", self.model.processor_of(partition), self.observed(step, "processor", int))

    @op(args=["partition", "key_hash"], observed=["offset"])
    def op_append(self, step: Step) -> None:
        partition, key_hash = self._naturals(step, ["partition", "key_hash"])
        self.expect("EX-7", "offset", self.model.append(partition, key_hash), self.observed(step, "offset", int))

    @op(args=_HANDOVER)
    def op_assign(self, step: Step) -> None:
        self.model.assign(*self._naturals(step, _HANDOVER))

    @op(args=_HANDOVER)
    def op_release(self, step: Step) -> None:
        self.model.release(*self._naturals(step, _HANDOVER))

    @op(args=["partition", "offset", "processor"])
    def op_commit(self, step: Step) -> None:
        partition, offset = self._naturals(step, ["partition", "offset"])
        processor = self._natural(step, "processor") if "processor" in step.args else None
        self.model.commit(partition, offset, processor)

    @op(args=["processor"])
    def op_ready(self, step: Step) -> None:
        self.model.ready(self._natural(step, "processor"))

    def _read(self, step: Step, use: str) -> None:
        if self.model.view == GROUP:
            raise Malformed(step.line, f"op {step.op!r} happens inside a processor: not in the group's view")
        self.model.read(*self._naturals(step, _RECORD), use)

    @op(args=_RECORD)
    def op_process(self, step: Step) -> None:
        self._read(step, PROCESS)

    @op(args=_RECORD)
    def op_rebuild(self, step: Step) -> None:
        self._read(step, REBUILD)

    @op(args=_RECORD)
    def op_skip(self, step: Step) -> None:
        self._read(step, SKIP)
