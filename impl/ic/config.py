"""IcConfig: the individual-commit settings of the coordinator and the broker, under the seed's names.

    config = IcConfig.from_properties({"accept.individual.commit": "false"})
    config = IcConfig(max_ranges=5)            # tests

Names (spec/ic.md IC-6, IC-7; spec/key-range-assign.md KR-11, KR-12):
- `accept.individual.commit` (true): the coordinator takes IC commits (seed: broker config).
- `individual.commit.max.ranges` (1,000,000): ranges held per group and partition; a commit that
  would hold more is refused with MAX_INDIVIDUAL_COMMIT_REACHED. The seed names the error, not the
  setting. About 16 bytes a range (impl/ic/ranges.py): 16 MB for a partition at the cap.
- `individual.commit.log.segment.bytes` (10485760, the seed's default): the IC log is compacted when
  it outgrows this and at least half of its records are dead.
- `max.bytes.key.range.cache` (209715200, the seed's default): the filter results kept for the
  next fetch (key_range_cache.KeyRangeCache).
- `max.bytes.fetcher.filtering` (104857600, the seed's default): the most filtering one batch may cost,
  its decompressed bytes and 96 bytes a record (filtering.py); past it the fetch of that partition is
  refused (MESSAGE_TOO_LARGE), never cut.
- `individual.commit.max.ranges.per.commit` (100,000; the broker's own, in the seed's style): the ranges
  one OffsetCommit may carry for one partition. The broker answers a partition carrying more
  INVALID_REQUEST before the coordinator sees it: a commit costs time in proportion to its ranges, and
  a million of them kept every other client waiting for seconds.
`from_properties` takes strings or ints; an unknown name or a bad value raises ValueError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from kipcheck.impl.settings import field_of, kafka_name, parse_boolean, parse_integer

_PROPERTIES = {
    "accept.individual.commit": "accept_individual_commit",
    "individual.commit.max.ranges": "max_ranges",
    "individual.commit.log.segment.bytes": "segment_bytes",
    "max.bytes.key.range.cache": "key_range_cache_bytes",
    "max.bytes.fetcher.filtering": "filtering_bytes",
    "individual.commit.max.ranges.per.commit": "max_ranges_per_commit",
}


@dataclass(frozen=True, slots=True)
class IcConfig:
    accept_individual_commit: bool = True
    max_ranges: int = 1_000_000
    segment_bytes: int = 10 * 1024 * 1024
    key_range_cache_bytes: int = 200 * 1024 * 1024
    filtering_bytes: int = 100 * 1024 * 1024
    max_ranges_per_commit: int = 100_000

    def __post_init__(self) -> None:
        if type(self.accept_individual_commit) is not bool:
            raise ValueError(f"accept.individual.commit must be true or false, found {self.accept_individual_commit!r}")
        for field_name, minimum in (("max_ranges", 0), ("segment_bytes", 1), ("key_range_cache_bytes", 0),
                                    ("filtering_bytes", 1), ("max_ranges_per_commit", 1)):
            value = getattr(self, field_name)
            if type(value) is not int or value < minimum:
                raise ValueError(f"{kafka_name(_PROPERTIES, field_name)} must be an integer >= {minimum}, found {value!r}")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str | int | bool]) -> "IcConfig":
        values: dict[str, int | bool] = {}
        for name, raw in properties.items():
            field_name = field_of(_PROPERTIES, name, "individual-commit config")
            values[field_name] = parse_boolean(name, raw) if field_name == "accept_individual_commit" \
                else parse_integer(name, raw)
        return cls(**values)

    def trace_config(self) -> dict[str, object]:
        """The `ic` trace header's config (shared/TRACE-FORMAT.md)."""
        return {"max_ranges": self.max_ranges, "accept_individual_commit": self.accept_individual_commit}


def known_names() -> list[str]:
    return sorted(_PROPERTIES)
