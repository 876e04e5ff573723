"""Kafka frames in and out, through kio: request decoding, response encoding, typed building.

Every request and response goes through kio's generated schemas (with the
individual-commit tagged fields of schemas.py); this module
adds only the frame length prefix and `build`, which turns plain Python values
(ints, strings, dicts, lists) into a version's own kio dataclasses. kio does not
check types when a message is built, so `build` converts by the schema's type
hints: milliseconds -> `i32Timedelta`, ints or names -> `ErrorCode`, dicts ->
the version's nested dataclass, lists -> tuples; keys the version lacks are
dropped, so one handler can serve several versions.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
from functools import lru_cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32Timedelta

from kipcheck.impl.wire.errors import error_code, error_code_of
from kipcheck.impl.wire.frame_check import FrameError, check_frame
from kipcheck.impl.wire.schemas import request_schema, response_schema

API_VERSIONS_KEY = 18


class TooCostly(FrameError):
    """A frame whose decoded form would hold more than the bytes a request may hold."""


class UnsupportedApi(Exception):
    """A request whose API key or version this broker does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id


@dataclasses.dataclass(frozen=True)
class Request:
    """One decoded request: its key, version, correlation id, header and body."""

    api_key: int
    api_version: int
    correlation_id: int
    header: Any
    body: Any


def decode_request(frame: bytes, supported: dict[int, tuple[int, int]], max_decoded_bytes: int = 2**63) -> Request:
    """Decode one frame (without its length prefix).

    Raises UnsupportedApi for a key/version outside `supported` and FrameError
    for anything kio cannot parse, or that claims more than the frame holds
    (checked before kio allocates for it: frame_check); TooCostly if its arrays
    would hold more than `max_decoded_bytes` decoded (frame_check's estimate).
    """
    if len(frame) < 8:
        raise FrameError(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
    low, high = supported.get(api_key, (1, 0))
    if not low <= api_version <= high:
        raise UnsupportedApi(api_key, api_version, correlation_id)
    request_class = request_schema(api_key, api_version)
    try:
        decoded_bytes = check_frame(request_class, frame)
    except FrameError as error:
        raise FrameError(f"api key {api_key} v{api_version}: {error}") from None
    if decoded_bytes > max_decoded_bytes:
        raise TooCostly(f"api key {api_key} v{api_version}: its arrays would take about {decoded_bytes} bytes "
                        f"decoded, more than {max_decoded_bytes}")
    try:
        header, header_size = entity_reader(request_class.__header_schema__)(frame, 0)
        body, _ = entity_reader(request_class)(frame, header_size)
    except Exception as error:  # kio raises many types on garbage; all mean "undecodable"
        raise FrameError(f"api key {api_key} v{api_version}: {type(error).__name__}: {error}") from error
    # Bytes after the body are ignored, as Kafka's AbstractRequest.parseRequest ignores them: librdkafka's
    # Metadata v12 for every topic (AdminClient.list_topics) carries three.
    return Request(api_key, api_version, correlation_id, header, body)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """The response frame, length prefix included, of a kio body or a Reply."""
    if isinstance(body, Reply):
        body = build(body.response_class, body.values)
    response_class = response_schema(api_key, api_version)
    header_class = response_class.__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_class)(buffer, header_class(correlation_id=correlation_id))
    entity_writer(response_class)(buffer, body)
    frame = buffer.getbuffer()
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)


def response_class(api_key: int, api_version: int) -> type:
    return response_schema(api_key, api_version)


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, tuple[Any, bool]]:
    """Field name -> (type hint, has a default) for a kio dataclass."""
    hints = typing.get_type_hints(cls)
    return {
        field.name: (hints[field.name], field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING)
        for field in dataclasses.fields(cls)
    }


def build(cls: type, values: dict[str, Any] | None = None, **more: Any) -> Any:
    """An instance of kio dataclass `cls` from plain values (see the module docstring)."""
    values = {**(values or {}), **more}
    fields = _hints(cls)
    kwargs = {name: _convert(fields[name][0], value) for name, value in values.items() if name in fields}
    missing = [name for name, (_, has_default) in fields.items() if not has_default and name not in kwargs]
    if missing:
        raise TypeError(f"{cls.__qualname__} v{cls.__version__}: missing {', '.join(missing)}")
    return cls(**kwargs)


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [argument for argument in typing.get_args(hint) if argument is not type(None)]
        return _convert(inner[0], value)
    if origin is tuple:
        return tuple(_convert(typing.get_args(hint)[0], item) for item in value)
    if hint is ErrorCode:
        return error_code(value)
    if hint is i16 and isinstance(value, str):   # an error code kio's ErrorCode does not know (errors.py)
        return i16(error_code_of(value))
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        delta = value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
        return i32Timedelta.parse(delta)
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return build(hint, value)
    return value


@dataclasses.dataclass(frozen=True)
class Reply:
    """A response body to build from plain values when it is encoded: for a large request both happen on a
    worker thread, so a handler's answer of many entries costs the event loop only the plain values."""

    response_class: type
    values: dict[str, Any]


def reply(request: Request, **values: Any) -> Reply:
    """The response body of `request`'s own API version, built from plain values as it is encoded."""
    return Reply(response_class(request.api_key, request.api_version), values)
