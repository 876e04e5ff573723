"""GroupConfig: the consumer-group coordinator's settings, under Kafka 4.2's names (GroupCoordinatorConfig).

    config = GroupConfig.from_properties({"group.consumer.session.timeout.ms": "6000"})

Defaults are Kafka's, except the group sizes: Kafka leaves group.max.size and
group.consumer.max.size unbounded (Integer.MAX_VALUE); kipcheck bounds every
input, so both default to 1000 (set them higher if you need to).
`group.consumer.assignors` is a comma-separated list of server assignor names
(impl/groups/assignors.py: uniform, range, key-range-round-robin, and any
registered one); the first is the default of a group whose members name none. An unknown name or a bad
value raises ValueError naming the setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from kipcheck.impl.groups.assignors import ASSIGNORS
from kipcheck.impl.settings import field_of, kafka_name, parse_integer

_PROPERTIES = {
    "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
    "group.consumer.max.size": "consumer_max_size",
    "group.consumer.assignors": "consumer_assignors",
    "group.min.session.timeout.ms": "min_session_timeout_ms",
    "group.max.session.timeout.ms": "max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
    "group.max.size": "classic_max_size",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.topic.segment.bytes": "offsets_segment_bytes",
}
_MAY_BE_ZERO = {"initial_rebalance_delay_ms"}


@dataclass(frozen=True)
class GroupConfig:
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 1000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    classic_max_size: int = 1000
    offset_metadata_max_bytes: int = 4096
    offsets_segment_bytes: int = 100 * 1024 * 1024  # the offsets log is compacted past this size

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if type(value) is int and value < (0 if name in _MAY_BE_ZERO else 1):
                raise ValueError(f"{kafka_name(_PROPERTIES, name)} must be {'>= 0' if name in _MAY_BE_ZERO else 'positive'}, "
                                 f"found {value}")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:  # GroupCoordinatorConfig
            raise ValueError("group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms")
        unknown = [name for name in self.consumer_assignors if name not in ASSIGNORS]
        if not self.consumer_assignors or unknown:
            raise ValueError(f"group.consumer.assignors must name known assignors ({', '.join(sorted(ASSIGNORS))}), "
                             f"found {', '.join(self.consumer_assignors) or 'none'}")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str | int]) -> "GroupConfig":
        values: dict[str, object] = {}
        for name, raw in properties.items():
            field_name = field_of(_PROPERTIES, name, "group config")
            if field_name == "consumer_assignors":
                values[field_name] = tuple(part.strip() for part in str(raw).split(",") if part.strip())
            else:
                values[field_name] = parse_integer(name, raw)
        return cls(**values)


def known_names() -> list[str]:
    return sorted(_PROPERTIES)
