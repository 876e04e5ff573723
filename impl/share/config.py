"""ShareConfig: the share-group settings of the engine, under Kafka's own names.

    config = ShareConfig.from_properties({"group.share.record.lock.duration.ms": "15000"})
    config = ShareConfig(record_lock_duration_ms=100, profile="kip")   # tests

`from_properties` takes strings (as a server.properties file or a command line
gives them) or ints; an unknown name or a bad value raises ValueError naming
the setting, so a CLI can print it instead of a traceback. Under `kafka-4.2` it
also enforces Kafka 4.2's ranges, as a Kafka broker refuses to start outside
them (SP-45): delivery limit 2..10, record locks 100..10000, the lock duration
within group.share.min/max.record.lock.duration.ms (15000 and 60000 unless
set; each in Kafka's own range). Under `kip` only values that make no sense
(zero or negative durations and limits) are refused. Constructed directly,
the config takes any positive value, so a test may use a 100 ms lock.

Profiles: "kafka-4.2" (the default; Apache Kafka 4.2's released behaviour,
what the broker serves) or "kip" (the KIP-932 text of seed 002). "kafka-4.4"
is a judging profile (spec/README.md, "Profiles"): the reference
implementation does not serve it, and says so (`unserved_profile`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Mapping

from kipcheck.impl.settings import field_of, kafka_name, parse_integer
from kipcheck.model.profiles import KAFKA_42, KIP
from kipcheck.model.profiles import PROFILES as JUDGED_PROFILES
from kipcheck.model.share_partition import KAFKA_RANGES

PROFILES = (KAFKA_42, KIP)  # what the reference implementation serves
AUTO_OFFSET_RESETS = ("latest", "earliest", "by_duration:<ISO-8601 duration, e.g. PT1H>")
BY_DURATION = "by_duration:"
# java.time.Duration.parse's days, hours, minutes and seconds, as Kafka's AutoOffsetResetStrategy reads them.
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d{1,3})\d*)?S)?)?", re.IGNORECASE)
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")  # share.isolation.level (spec SP-62)

# Kafka's config name -> (field name, parser); one place lists every setting.
_PROPERTIES = {
    "group.share.record.lock.duration.ms": "record_lock_duration_ms",
    "group.share.delivery.count.limit": "delivery_count_limit",
    "group.share.min.record.lock.duration.ms": "min_record_lock_duration_ms",
    "group.share.max.record.lock.duration.ms": "max_record_lock_duration_ms",
    "group.share.partition.max.record.locks": "max_inflight_records",
    "group.share.max.share.sessions": "max_share_sessions",
    "share.coordinator.snapshot.update.records.per.snapshot": "updates_per_snapshot",
    "share.auto.offset.reset": "auto_offset_reset",
    "share.isolation.level": "isolation_level",
    "profile": "profile",
}


@dataclass(frozen=True, slots=True)
class ShareConfig:
    record_lock_duration_ms: int = 30000
    # The bounds of the lock duration, the broker's and a group's (Kafka 4.2 checks them under kafka-4.2).
    min_record_lock_duration_ms: int = 15000
    max_record_lock_duration_ms: int = 60000
    delivery_count_limit: int = 5
    max_inflight_records: int = 2000
    max_share_sessions: int = 2000
    updates_per_snapshot: int = 500
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    profile: str = "kafka-4.2"

    def __post_init__(self) -> None:
        for name in ("record_lock_duration_ms", "min_record_lock_duration_ms", "max_record_lock_duration_ms",
                     "delivery_count_limit", "max_inflight_records", "max_share_sessions", "updates_per_snapshot"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{kafka_name(_PROPERTIES, name)} must be a positive integer, found {value!r}")
        if self.auto_offset_reset not in AUTO_OFFSET_RESETS[:2] and self.reset_duration_ms is None:
            raise ValueError(f"share.auto.offset.reset must be one of {', '.join(AUTO_OFFSET_RESETS)}, "
                             f"found {self.auto_offset_reset!r}")
        if self.profile not in PROFILES:
            raise ValueError(unserved_profile(self.profile))
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"share.isolation.level must be one of {', '.join(ISOLATION_LEVELS)}, "
                             f"found {self.isolation_level!r}")
        if self.isolation_level == "read_committed" and self.profile != "kafka-4.2":
            raise ValueError("share.isolation.level read_committed needs profile kafka-4.2 (spec SP-60)")

    @property
    def reset_duration_ms(self) -> int | None:
        """The duration of `share.auto.offset.reset=by_duration:<duration>` in ms; None for another value."""
        if not self.auto_offset_reset.startswith(BY_DURATION):
            return None
        text = self.auto_offset_reset[len(BY_DURATION):]
        match = _DURATION.fullmatch(text)
        if match is None or text.upper().endswith(("P", "T")):   # "P" or "PT" alone name no duration
            return None
        days, hours, minutes, seconds = (int(part or 0) for part in match.groups()[:4])
        milliseconds = int((match.group(5) or "").ljust(3, "0"))
        return (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + milliseconds

    @classmethod
    def from_properties(cls, properties: Mapping[str, str | int]) -> "ShareConfig":
        """Build from Kafka config names; ValueError names the first unknown or bad setting."""
        values: dict[str, str | int] = {}
        for name, raw in properties.items():
            field_name = field_of(_PROPERTIES, name, "share config")
            values[field_name] = _parse_value(name, field_name, raw)
        config = cls(**values)
        if config.profile == "kafka-4.2":
            config.check_kafka_ranges()
        return config

    def check_kafka_ranges(self) -> None:
        """ValueError naming the first setting Kafka 4.2 refuses to start with (ShareGroupConfig, SP-45)."""
        for field_name, least, most in _KAFKA_RANGES:
            _check_range(kafka_name(_PROPERTIES, field_name), getattr(self, field_name), least, most)
        # ShareGroupConfig.validate: the lock duration lies within the broker's own bounds.
        self.check_lock_duration("group.share.record.lock.duration.ms")

    def check_lock_duration(self, name: str) -> None:
        """ValueError unless the lock duration (the broker's, or a group's `name`) is within the bounds."""
        _check_range(name, self.record_lock_duration_ms, self.min_record_lock_duration_ms,
                     self.max_record_lock_duration_ms, "group.share.min.record.lock.duration.ms",
                     "group.share.max.record.lock.duration.ms")

    def trace_config(self, start_offset: int) -> dict[str, object]:
        """The share-partition trace header's config (shared/TRACE-FORMAT.md) for this engine."""
        return {
            "start_offset": start_offset,
            "delivery_count_limit": self.delivery_count_limit,
            "record_lock_duration_ms": self.record_lock_duration_ms,
            "max_inflight_records": self.max_inflight_records,
            # SP-40: this engine answers INVALID_RECORD_STATE where Kafka 4.2 fails with UNKNOWN_SERVER_ERROR.
            **({"straddle_npe": "flag"} if self.profile == "kafka-4.2" else {}),
            # SP-45: an engine built directly with test-sized settings says so; the broker's are in range.
            **({"kafka_ranges": "waive"} if self.profile == "kafka-4.2" and not self.in_kafka_ranges() else {}),
        } | ({"isolation_level": self.isolation_level} if self.isolation_level == "read_committed" else {})

    def in_kafka_ranges(self) -> bool:
        try:
            self.check_kafka_ranges()
        except ValueError:
            return False
        return True


# (field, least, most): the share-partition's ranges the judge holds a trace to, and the lock bounds' own.
_KAFKA_RANGES = (
    *((field_name, least, most) for field_name, (_, least, most) in KAFKA_RANGES.items()),
    ("min_record_lock_duration_ms", 1000, 30000),
    ("max_record_lock_duration_ms", 30000, 3600000),
)


def _check_range(name: str, value: int, least: int, most: int, least_name: str = "", most_name: str = "") -> None:
    if not least <= value <= most:
        bounds = f" ({least_name} to {most_name})" if least_name else ""
        raise ValueError(f"{name} must be in {least}..{most}{bounds} under Kafka 4.2, found {value}")


_STRING_FIELDS = {field.name for field in fields(ShareConfig) if field.type == "str"}


def _parse_value(name: str, field_name: str, raw: str | int) -> str | int:
    if field_name in _STRING_FIELDS:
        if not isinstance(raw, str):
            raise ValueError(f"{name} must be a string, found {raw!r}")
        return raw.strip()
    return parse_integer(name, raw)


def unserved_profile(profile: str) -> str:
    """Why the reference implementation does not serve `profile` (one it serves gets no reason)."""
    if profile in JUDGED_PROFILES:
        return (f"profile {profile} is a judging profile: the reference implementation serves "
                f"{' and '.join(PROFILES)} only; {profile} judges Apache Kafka's own brokers and other "
                f"implementations (kipcheck check, kipcheck conform --target kafka:4.4 --profile {profile})")
    return f"profile must be one of {', '.join(PROFILES)}, found {profile!r}"
