"""Impossible counts and lengths are refused before kio decodes a request (Kafka's KAFKA-14063).

kio's native reader reserves room for as many elements as an array count
claims before it reads any of them, and a failed allocation aborts the
process: a 28-byte Produce frame whose compact count says 2^32 + 3 asks for
32 GiB. Apache Kafka refuses such counts (KAFKA-14063): every element takes
at least one byte, so a count larger than the bytes left in the frame is
impossible.

`check_frame(request_class, frame)` walks the frame along the request's kio
schema the way kio's reader will (kio.serial._introspect classifies each
dataclass field as kio's reader does: `kafka_type`, nullability, `tag`, legacy
or compact encodings by `__flexible__`, the request header's legacy
`client_id`) and raises FrameError for
- an array count whose elements, at their smallest possible size (at least
  one byte), cannot fit in the bytes left;
- a string or bytes length, or a tagged-field count, beyond the bytes left;
- a negative length other than null's -1, a varint longer than 5 bytes, an
  unknown tag (kio refuses all three too), or a frame that ends inside a field;
- null (-1) for an array, string or bytes field the schema does not make
  nullable, as Kafka's generated readers refuse it ("non-nullable field ...
  was serialized as null"): kio would hand the handler None where it expects
  a sequence.
It builds no values; kio decodes the frame afterwards. It returns about the
bytes kio's decoded form of the frame's arrays will hold (DECODED_STRUCT_BYTES
an element that is a struct, DECODED_VALUE_BYTES one that is a value), which
codec.py weighs against what a request may hold.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag, \
    get_schema_field_type, is_optional

FIXED_SIZES = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
               "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
               "uuid": 16}
VARINT_MAX_BYTES = 5
TAGGED_FIELD_MIN_BYTES = 2  # a tag and a size, one varint byte each
# What kio's decoded form of an array element holds at most: a struct's dataclass with slots, a UUID or a
# string and the tuple slot (134 bytes measured for a Metadata v12 topic id); a value's int and tuple slot.
DECODED_STRUCT_BYTES, DECODED_VALUE_BYTES = 160, 40
_decoded = threading.local()  # the decoded bytes counted by the check running on this thread


class FrameError(Exception):
    """A frame that cannot be decoded: the connection is closed."""


@dataclass(frozen=True)
class Shape:
    """How to step over one field: `skip(frame, offset)` returns the offset after it."""

    skip: Callable[[bytes, int], int]
    min_size: int  # the fewest bytes the field can take
    fixed: bool    # always exactly min_size bytes


def check_frame(request_class: type, frame: bytes) -> int:
    """About the bytes the decoded arrays of `frame` (header and body, no length prefix) will hold;
    FrameError if it claims more than it holds."""
    _decoded.bytes = 0
    try:
        offset = struct_shape(request_class.__header_schema__).skip(frame, 0)
        offset = struct_shape(request_class).skip(frame, offset)
    except (IndexError, struct.error):
        offset = len(frame) + 1
    if offset > len(frame):
        raise FrameError("the frame ends inside a field")
    return _decoded.bytes


@lru_cache(maxsize=None)
def struct_shape(cls: type, nullable: bool = False) -> Shape:
    """A kio dataclass: its fields in order, then (flexible versions) its tagged fields."""
    is_header = cls.__name__ == "RequestHeader"
    fields, tagged = [], {}
    for field in dataclasses.fields(cls):
        shape = _field_shape(field, cls.__flexible__, is_header)
        tag = get_field_tag(field)
        if tag is None:
            fields.append(shape)
        else:
            tagged[tag] = shape
    min_size = 1 if nullable else sum(shape.min_size for shape in fields) + cls.__flexible__  # null: its marker
    if all(shape.fixed for shape in fields) and not cls.__flexible__ and not nullable:
        return _fixed(min_size)
    skips = [shape.skip for shape in _merge_fixed(fields)]

    def skip(frame: bytes, offset: int) -> int:
        if nullable:
            offset += 1
            if frame[offset - 1] == 0xFF:  # int8 -1: null
                return offset
        for skip_field in skips:
            offset = skip_field(frame, offset)
        if not cls.__flexible__:
            return offset
        return offset + 1 if frame[offset] == 0 else _skip_tagged_fields(tagged, frame, offset)  # 0: no tags

    return Shape(skip, min_size, False)


def _merge_fixed(shapes: list[Shape]) -> list[Shape]:
    """Runs of fixed-size fields as one step each (fewer calls per struct)."""
    merged: list[Shape] = []
    for shape in shapes:
        if shape.fixed and merged and merged[-1].fixed:
            merged[-1] = _fixed(merged[-1].min_size + shape.min_size)
        else:
            merged.append(shape)
    return merged


def _field_shape(field: dataclasses.Field, flexible: bool, is_header: bool) -> Shape:
    if is_header and field.name == "client_id":  # Kafka keeps the header's client id a legacy string
        return _sized(flexible=False, prefix_bytes=2, null_refused=None)
    kind = classify_field(field)
    null_refused = None if is_optional(field) else field.name
    if isinstance(kind, (EntityField, EntityTupleField)):
        element = struct_shape(kind.type_, isinstance(kind, EntityField) and is_optional(field))
        decoded_bytes = DECODED_STRUCT_BYTES
    else:
        element = _primitive_shape(get_schema_field_type(field), flexible, None if kind.is_array else null_refused)
        decoded_bytes = DECODED_VALUE_BYTES
    return _array(element, flexible, null_refused, decoded_bytes) if kind.is_array else element


def _primitive_shape(kafka_type: str, flexible: bool, null_refused: str | None) -> Shape:
    if kafka_type in FIXED_SIZES:
        return _fixed(FIXED_SIZES[kafka_type])
    if kafka_type == "string":
        return _sized(flexible, prefix_bytes=2, null_refused=null_refused)
    if kafka_type in ("bytes", "records"):
        return _sized(flexible, prefix_bytes=4, null_refused=null_refused)
    raise ValueError(f"unknown kafka_type {kafka_type!r}")


@lru_cache(maxsize=None)
def _fixed(size: int) -> Shape:
    return Shape(lambda frame, offset: offset + size, size, True)


@lru_cache(maxsize=None)
def _sized(flexible: bool, prefix_bytes: int, null_refused: str | None) -> Shape:
    """A string or bytes: a length (compact varint + 1, or int16/int32 with -1 for null), then that many bytes;
    null refused for the field named `null_refused` (None: nullable)."""
    def skip(frame: bytes, offset: int) -> int:
        length, offset = _read_count(frame, offset, flexible, prefix_bytes)
        if length > len(frame) - offset:
            raise _too_long(frame, offset, length, "length")
        if length == -1:
            if null_refused is not None:
                raise _null(null_refused, offset)
            return offset
        return offset + length

    return Shape(skip, 1 if flexible else prefix_bytes, False)


def _array(element: Shape, flexible: bool, null_refused: str | None, decoded_bytes: int) -> Shape:
    minimum_size = max(element.min_size, 1)  # Kafka's rule: every element takes at least one byte

    def skip(frame: bytes, offset: int) -> int:
        count, offset = _read_count(frame, offset, flexible, 4)
        if count * minimum_size > len(frame) - offset:  # KAFKA-14063
            raise _too_long(frame, offset, count, "array count")
        if count == -1:
            if null_refused is not None:
                raise _null(null_refused, offset)
            return offset
        _decoded.bytes += count * decoded_bytes
        if element.fixed:
            return offset + count * element.min_size
        for _ in range(count):
            offset = element.skip(frame, offset)
        return offset

    return Shape(skip, 1 if flexible else 4, False)


def _skip_tagged_fields(tagged: dict[int, Shape], frame: bytes, offset: int) -> int:
    count, offset = _read_uvarint(frame, offset)
    if count * TAGGED_FIELD_MIN_BYTES > len(frame) - offset:
        raise _too_long(frame, offset, count, "tagged field count")
    for _ in range(count):
        tag, offset = _read_uvarint(frame, offset)
        _, offset = _read_uvarint(frame, offset)  # kio reads the value by its schema, not by this size
        if tag not in tagged:
            raise FrameError(f"unknown tagged field {tag} at byte {offset}")
        offset = tagged[tag].skip(frame, offset)
    return offset


def _read_count(frame: bytes, offset: int, flexible: bool, prefix_bytes: int) -> tuple[int, int]:
    """A length or count (-1 for null): compact (unsigned varint, value + 1) or a signed int16/int32."""
    if flexible:
        value, offset = _read_uvarint(frame, offset)
        return value - 1, offset
    (value,) = struct.unpack_from(">h" if prefix_bytes == 2 else ">i", frame, offset)
    if value < -1:
        raise FrameError(f"negative length {value} at byte {offset}")
    return value, offset + prefix_bytes


def _read_uvarint(frame: bytes, offset: int) -> tuple[int, int]:
    if frame[offset] < 0x80:  # the usual case: one byte
        return frame[offset], offset + 1
    value = 0
    for index in range(VARINT_MAX_BYTES):
        byte = frame[offset + index]
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return value, offset + index + 1
    raise FrameError(f"varint at byte {offset} longer than {VARINT_MAX_BYTES} bytes")


def _null(field_name: str, offset: int) -> FrameError:
    return FrameError(f"non-nullable field {field_name} was serialized as null (byte {offset})")


def _too_long(frame: bytes, offset: int, count: int, what: str) -> FrameError:
    return FrameError(f"{what} {count} at byte {offset} cannot fit in the {len(frame) - offset} bytes left")
