"""The consumer's side of individual commit: its switches, the ranges it has processed, when to commit
them and how to split a commit that does not fit in one request (spec/ic.md IC-18, KR-11).

    config = ConsumerIcConfig.from_properties({"max.num.ranges.to.commit": "10000"})
    config.assignment_error([(0, 2**62 - 1)])      # KR-11: CONSUMER_RANGE_FETCH_NOT_ACCEPTED if not allowed
    pending = PendingCommits(config)
    pending.add("orders", 0, 41, 42)               # processed offsets, merged into ranges
    pending.due()                                  # more than max.num.ranges.to.commit ranges wait: commit now
    for request in pending.take():                 # [{TopicPartition: [(first, last), ...]}, ...]
        ... send; if it failed: pending.restore(request)   # nothing is ever dropped

`max.num.ranges.to.commit` (10,000) counts the ranges waiting over all the
consumer's partitions. Passing it makes a commit due; it never caps what is
kept. What binds a request is its size: `max_request_bytes` (1,000,000,
librdkafka's message.max.bytes, which bounds every request it sends, and below
the seed's "1MB"); a range costs 16 bytes on the wire (two int64), so about
62,000 ranges fit once the envelope is reserved. A partition with more ranges
is spread over several requests: IC commits are unions, so their order does
not matter (IC-2). The coordinator's IC log never binds (its entries are split).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from kipcheck.impl.ic.ranges import Range, RangeSet
from kipcheck.impl.settings import parse_boolean, parse_integer
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.model.ic import RANGE_WIRE_BYTES, commit_due
from kipcheck.model.key_hash import range_fetch_error

REQUEST_ENVELOPE_BYTES = 4096       # header, group and member ids, generation: reserved per request
TOPIC_ENVELOPE_BYTES = 64           # plus the name
PARTITION_ENVELOPE_BYTES = 64       # index, offset, leader epoch, metadata, tagged-field framing


@dataclass(frozen=True, slots=True)
class ConsumerIcConfig:
    allow_individual_commit: bool = True
    max_num_ranges_to_commit: int = 10_000
    max_request_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        if type(self.max_num_ranges_to_commit) is not int or self.max_num_ranges_to_commit < 1:
            raise ValueError(f"max.num.ranges.to.commit must be a positive integer, found {self.max_num_ranges_to_commit!r}")
        if self.max_request_bytes < REQUEST_ENVELOPE_BYTES + TOPIC_ENVELOPE_BYTES + PARTITION_ENVELOPE_BYTES + 256:
            raise ValueError(f"max_request_bytes {self.max_request_bytes} leaves no room for ranges")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str | int | bool]) -> "ConsumerIcConfig":
        values: dict = {}
        for name, raw in properties.items():
            if name == "allow.individual.commit":
                values["allow_individual_commit"] = parse_boolean(name, raw)
            elif name == "max.num.ranges.to.commit":
                values["max_num_ranges_to_commit"] = parse_integer(name, raw)
            else:
                raise ValueError(f"unknown consumer individual-commit config {name!r}")
        return cls(**values)

    def assignment_error(self, ranges: list[Range]) -> str:
        """KR-11 at the consumer: an assignment with key ranges is refused unless it allows key sharing."""
        return range_fetch_error(ranges, True, self.allow_individual_commit)


class PendingCommits:
    def __init__(self, config: ConsumerIcConfig | None = None) -> None:
        self.config = config or ConsumerIcConfig()
        self._ranges: dict[TopicPartition, RangeSet] = {}
        self.count = 0

    def add(self, topic: str, partition: int, first: int, last: int) -> None:
        """Offsets first..last were processed: merged into the partition's pending ranges."""
        if not 0 <= first <= last:
            raise ValueError(f"processed offsets must be a range of non-negative offsets, found {first}..{last}")
        held = self._ranges.setdefault(TopicPartition(topic, partition), RangeSet())
        touched = held.touching(first, last)
        merged = (min([first] + [low for low, _ in touched]), max([last] + [high for _, high in touched]))
        held.replace(touched, merged)
        self.count += 1 - len(touched)

    def due(self) -> bool:
        return commit_due(self.count, self.config.max_num_ranges_to_commit)

    def take(self) -> list[dict[TopicPartition, list[Range]]]:
        """Everything pending, as requests that each fit in max_request_bytes; nothing stays pending."""
        requests: list[dict[TopicPartition, list[Range]]] = []
        request: dict[TopicPartition, list[Range]] = {}
        topics: set[str] = set()
        budget = self.config.max_request_bytes - REQUEST_ENVELOPE_BYTES
        for tp, held in sorted(self._ranges.items()):
            topic = tp.topic
            for pair in held:
                cost = RANGE_WIRE_BYTES + (0 if tp in request else PARTITION_ENVELOPE_BYTES) \
                    + (0 if topic in topics else TOPIC_ENVELOPE_BYTES + len(topic.encode()))
                if cost > budget:
                    requests.append(request)
                    request, topics, budget = {}, set(), self.config.max_request_bytes - REQUEST_ENVELOPE_BYTES
                    cost = RANGE_WIRE_BYTES + PARTITION_ENVELOPE_BYTES + TOPIC_ENVELOPE_BYTES + len(topic.encode())
                request.setdefault(tp, []).append(pair)
                topics.add(topic)
                budget -= cost
        if request:
            requests.append(request)
        self._ranges.clear()
        self.count = 0
        return requests

    def restore(self, request: dict[TopicPartition, list[Range]]) -> None:
        """A request that was not answered NONE: its ranges wait again (merged with anything newer)."""
        for (topic, partition), pairs in request.items():
            for first, last in pairs:
                self.add(topic, partition, first, last)
