"""RawClient: a Kafka wire client built on kio, for requests no real client would send (tests, probes, fuzzing).

    client = RawClient(port)
    answer = client.request(78, 1, group_id="g", member_id="m", ...)   # a kio response body, or None if closed
    client.send(b"...")                                                  # raw bytes
    client.closed_by_peer()

Request bodies are plain values, built by impl/wire/codec.build, and
frames encoded and decoded as impl/consumer's BrokerConnection does.
`sample_frame(api_key, version)` is a request frame with one of everything
its schema has (every array one element long, every nullable struct and
tagged field present), for fuzzing and measuring the decoder;
`huge_count_mutations(frame)` puts impossible counts into it at every byte.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import struct
import uuid

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.primitive import i32Timedelta, i64Timedelta
from kipcheck.impl.consumer.connection import (
    decode_response,
    encode_entity,
    encode_request,
)

# Counts no short frame can hold, as each encoding writes them: int32 2^31 - 1 (legacy arrays and
# bytes), unsigned varints for compact counts 2^32 + 4 and 2^31 - 1 (the value is the count + 1),
# int16 2^15 - 1 (legacy strings).
HUGE_COUNTS = (struct.pack(">i", 2**31 - 1), bytes([0x85, 0x80, 0x80, 0x80, 0x10]),
               bytes([0x80, 0x80, 0x80, 0x80, 0x08]), struct.pack(">h", 2**15 - 1))
HEADER_FIXED_BYTES = 8  # api key, version, correlation id: changing them makes another request, not a count

SAMPLE_VALUES = {"bool": False, "error_code": ErrorCode.none, "float64": 0.5, "string": "a", "bytes": b"b",
                 "records": b"r", "uuid": uuid.UUID(int=1),
                 "timedelta_i32": i32Timedelta.parse(datetime.timedelta(milliseconds=1)),
                 "timedelta_i64": i64Timedelta.parse(datetime.timedelta(milliseconds=1)),
                 "datetime_i64": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)}


class RawClient:
    """A Kafka wire client built on kio: `request(api_key, version, **body)` -> response body, or None if closed."""

    def __init__(self, port: int, timeout_s: float = 30):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.correlation_id = 0

    def close(self) -> None:
        self.socket.close()

    def encode(self, api_key: int, version: int, **body) -> bytes:
        self.correlation_id += 1
        return encode_request(api_key, version, self.correlation_id, "kipcheck-test", body)

    def request(self, api_key: int, version: int, **body):
        self.send(self.encode(api_key, version, **body))
        return self.read_response(api_key, version)

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def read_frame(self) -> bytes | None:
        prefix = self._read_exactly(4)
        if prefix is None:
            return None
        return self._read_exactly(struct.unpack(">i", prefix)[0])

    def read_response(self, api_key: int, version: int):
        frame = self.read_frame()
        if frame is None:
            return None
        return decode_response(api_key, version, frame)[1]

    def closed_by_peer(self) -> bool:
        """True when the broker closed the connection (EOF or reset)."""
        try:
            return self.socket.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def _read_exactly(self, size: int) -> bytes | None:
        chunks, left = [], size
        try:
            while left:
                chunk = self.socket.recv(left)
                if not chunk:
                    return None
                chunks.append(chunk)
                left -= len(chunk)
        except (ConnectionResetError, BrokenPipeError):
            return None
        return b"".join(chunks)


def sample_frame(api_key: int, version: int, elements: int = 1, nulls: bool = False) -> bytes:
    """A request frame (length prefix included) with every field of its schema (see sample_entity)."""
    return encode_entity(sample_entity(load_request_schema(api_key, version), elements, nulls), 1, "kipcheck-test")


def sample_entity(cls: type, elements: int = 1, nulls: bool = False):
    """An instance of kio dataclass `cls` with every field set: arrays of `elements` elements, small values;
    with `nulls`, every nullable field that is not tagged is None instead."""
    values = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if nulls and is_optional(field) and get_field_tag(field) is None:
            value = None
        elif isinstance(kind, (EntityField, EntityTupleField)):
            value = sample_entity(kind.type_, elements, nulls)
        else:
            value = SAMPLE_VALUES.get(get_schema_field_type(field), 1)
        values[field.name] = (value,) * elements if kind.is_array and value is not None else value
    return cls(**values)


def huge_count_mutations(frame: bytes):
    """Copies of `frame` (length prefix included) with each HUGE_COUNTS encoding written over,
    and inserted at, every byte after the header's fixed part; the length prefix is kept honest."""
    body = frame[4:]
    for position in range(HEADER_FIXED_BYTES, len(body) + 1):
        for count in HUGE_COUNTS:
            for mutated in (body[:position] + count + body[position + len(count):], body[:position] + count + body[position:]):
                yield struct.pack(">i", len(mutated)) + mutated
