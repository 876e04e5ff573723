"""The individual-commit fields on the wire: kio's schemas extended with tagged fields (spec/ic.md IC-20).

    request_schema(8, 9)       # OffsetCommitRequest v9 whose partitions carry `offset_ranges`
    response_schema(9, 8)      # OffsetFetchResponse v8 whose partitions carry `committed_range_offsets`
    pairs((0, 4, 9, 9)) -> [(0, 4), (9, 9)];  flat([(0, 4), (9, 9)]) -> (0, 4, 9, 9)   # model/ic.py, IC-20

The seed's new fields ride as tagged fields of the flexible versions, so a
client that does not know them (librdkafka, the Java client) skips them and
keeps working. Each is a compact array of int64 holding the ranges' bounds in
pairs (first, last, first, last, ...): 16 bytes a range, the seed's figure.
Tag TAG (1000), far above the tags Kafka uses, in each of:

- OffsetCommit v8+ request partition: `offset_ranges` (OffsetRanges);
  response partition: `last_stable_offset` (int64, -1 unless answered);
- OffsetFetch v6+ response partition: `committed_range_offsets` (CommittedRangeOffsets);
- Fetch v12 request partition: `key_ranges` (KeyRanges, key-hash ranges; empty: every key);
- ConsumerGroupHeartbeat v0-v1 request and response TopicPartitions:
  `key_ranges`, the key shares of the topic's listed partitions as triples
  (partition, low, high); a listed partition without one is whole
  (spec/key-range-assign.md KR-14).

The response partitions' `error_code` is read and written as a plain int16,
since kio's ErrorCode enum does not know the seed's codes (IC-17; errors.py
names them). kio's reader refuses tags it does not know, so both ends use
these schemas: the broker (through codec.py) and the Python consumer.
"""

from __future__ import annotations

import dataclasses
import typing
from functools import cache

from kio.index import load_request_schema, load_response_schema
from kio.static.primitive import i16, i64

from kipcheck.model.ic import from_wire as pairs
from kipcheck.model.ic import to_wire as flat

TAG = 1000


def _ranges_field(name: str) -> tuple:
    return name, tuple[i64, ...], dataclasses.field(metadata={"kafka_type": "int64", "tag": TAG}, default=())


_ERROR_CODE = ("error_code", i16, dataclasses.field(metadata={"kafka_type": "int16"}))
_LAST_STABLE_OFFSET = ("last_stable_offset", i64,
                       dataclasses.field(metadata={"kafka_type": "int64", "tag": TAG}, default=i64(-1)))

# (api key, first flexible version served, last) -> (path to the partition entity, fields added or replaced)
_REQUESTS = {
    8: (8, 10, ("topics", "partitions"), [_ranges_field("offset_ranges")]),
    1: (12, 12, ("topics", "partitions"), [_ranges_field("key_ranges")]),
    68: (0, 1, ("topic_partitions",), [_ranges_field("key_ranges")]),
}
_RESPONSES = {
    8: (8, 10, ("topics", "partitions"), [_ERROR_CODE, _LAST_STABLE_OFFSET]),
    9: (6, 10, None, [_ERROR_CODE, _ranges_field("committed_range_offsets")]),
    1: (12, 12, ("responses", "partitions"), [_ERROR_CODE]),
    68: (0, 1, ("assignment", "topic_partitions"), [_ranges_field("key_ranges")]),
}


@cache
def request_schema(api_key: int, version: int) -> type:
    return _extended(load_request_schema(api_key, version), _REQUESTS.get(api_key), version)


@cache
def response_schema(api_key: int, version: int) -> type:
    return _extended(load_response_schema(api_key, version), _RESPONSES.get(api_key), version)


def _extended(schema: type, extension, version: int) -> type:
    if extension is None or not extension[0] <= version <= extension[1]:
        return schema
    _, _, path, added = extension
    if path is None:    # OffsetFetch: topics -> partitions before v8, groups -> topics -> partitions from v8
        path = ("groups", "topics", "partitions") if version >= 8 else ("topics", "partitions")
    return _with_fields(schema, path, added)


def _with_fields(entity: type, path: tuple[str, ...], added: list[tuple]) -> type:
    """A subclass of kio's `entity` whose nested entity at `path` has the `added` fields (same order otherwise)."""
    if not path:
        return _subclass(entity, added)
    name = path[0]
    original = next(field for field in dataclasses.fields(entity) if field.name == name)
    hint = typing.get_type_hints(entity)[name]
    optional = type(None) in typing.get_args(hint)   # `X | None` or `tuple[X, ...] | None`
    inner = next(arg for arg in typing.get_args(hint) if arg is not type(None)) if optional else hint
    many = typing.get_origin(inner) is tuple
    extended = _with_fields(typing.get_args(inner)[0] if many else inner, path[1:], added)
    new_hint = tuple[extended, ...] if many else extended
    default = {} if original.default is dataclasses.MISSING else {"default": original.default}
    replaced = (name, new_hint | None if optional else new_hint, dataclasses.field(metadata=original.metadata, **default))
    return _subclass(entity, [replaced])


def _subclass(entity: type, fields: list[tuple]) -> type:
    subclass = dataclasses.make_dataclass(entity.__name__, fields, bases=(entity,), frozen=True, slots=True,
                                          kw_only=True)
    subclass.__module__ = entity.__module__     # its type hints resolve in kio's module, as the base's do
    return subclass


__all__ = ["TAG", "flat", "pairs", "request_schema", "response_schema"]
