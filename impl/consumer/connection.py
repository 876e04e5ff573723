"""BrokerConnection: one blocking connection to a broker, speaking the Kafka wire protocol through kio.

    connection = BrokerConnection("127.0.0.1", 9092, client_id="c1", timeout_ms=30000,
                                  max_response_bytes=100_000_000)
    body = connection.request(3, 12, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    sent = connection.send(8, 9, group_id=..., ...)      # pipelined: answered later, in order
    body = connection.receive(sent)
    connection.close()

Request bodies are plain values (impl/wire/codec.build makes the version's kio
dataclasses of them); answers are kio response bodies. Anything that breaks the
connection (refused, reset, closed by the broker, a frame larger than
`max_response_bytes` (librdkafka's receive.message.max.bytes), a frame kio
cannot read, an answer to another request, no answer within `timeout_ms`)
raises ConnectionFailed and closes the socket: the caller opens a new one.
One thread uses a connection at a time.
"""

from __future__ import annotations

import io
import socket
import struct
from dataclasses import dataclass

from kio.serial import entity_reader, entity_writer
from kipcheck.impl.wire.codec import build
from kipcheck.impl.wire.schemas import request_schema, response_schema


class ConnectionFailed(Exception):
    """The connection broke (the message says how); it is closed."""


@dataclass(frozen=True)
class Sent:
    api_key: int
    version: int
    correlation_id: int


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str, body: dict) -> bytes:
    """A request frame, length prefix included, from plain values (impl/wire/codec.build)."""
    return encode_entity(build(request_schema(api_key, version), body), correlation_id, client_id)


def encode_entity(body, correlation_id: int, client_id: str) -> bytes:
    """The frame, length prefix included, of a kio request entity, with a request header of its version."""
    request_class = type(body)
    header_class = request_class.__header_schema__
    buffer = io.BytesIO()
    header = build(header_class, request_api_key=request_class.__api_key__, request_api_version=request_class.__version__,
                   correlation_id=correlation_id, client_id=client_id)
    entity_writer(header_class)(buffer, header)
    entity_writer(request_class)(buffer, body)
    frame = buffer.getvalue()
    return struct.pack(">i", len(frame)) + frame


def decode_response(api_key: int, version: int, frame: bytes):
    """(correlation id, response body) of a response frame without its length prefix."""
    response_class = response_schema(api_key, version)
    header, header_size = entity_reader(response_class.__header_schema__)(frame, 0)
    body, _ = entity_reader(response_class)(frame, header_size)
    return header.correlation_id, body


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout_ms: int, max_response_bytes: int):
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.timeout_ms = timeout_ms
        self.max_response_bytes = max_response_bytes
        self.correlation_id = 0
        try:
            self.socket = socket.create_connection((host, port), timeout=timeout_ms / 1000)
        except OSError as error:
            raise ConnectionFailed(f"cannot connect to {self.address}: {error}") from None
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, api_key: int, version: int, **body):
        return self.receive(self.send(api_key, version, **body))

    def send(self, api_key: int, version: int, **body) -> Sent:
        self.correlation_id += 1
        frame = encode_request(api_key, version, self.correlation_id, self.client_id, body)
        try:
            self.socket.sendall(frame)
        except OSError as error:
            self._fail(f"sending to {self.address} failed: {error}")
        return Sent(api_key, version, self.correlation_id)

    def receive(self, sent: Sent, timeout_ms: int | None = None):
        """The answer to `sent`, which must be the oldest request not yet received (within `timeout_ms`)."""
        self.socket.settimeout((timeout_ms or self.timeout_ms) / 1000)
        (size,) = struct.unpack(">i", self._read_exactly(4))
        if not 4 <= size <= self.max_response_bytes:
            self._fail(f"{self.address} answered a frame of {size} bytes (receive.message.max.bytes is "
                       f"{self.max_response_bytes})")
        frame = self._read_exactly(size)
        try:
            correlation_id, body = decode_response(sent.api_key, sent.version, frame)
        except Exception as error:  # kio raises many types on a frame it cannot read
            self._fail(f"{self.address}: undecodable answer to api key {sent.api_key} v{sent.version}: {error}")
        if correlation_id != sent.correlation_id:
            self._fail(f"{self.address} answered correlation id {correlation_id}, expected {sent.correlation_id}")
        return body

    def close(self) -> None:
        self.socket.close()

    def _read_exactly(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            try:
                chunk = self.socket.recv(min(left, 1 << 20))
            except OSError as error:  # timeouts included
                self._fail(f"reading from {self.address} failed: {error or type(error).__name__}")
            if not chunk:
                self._fail(f"{self.address} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _fail(self, reason: str):
        self.close()
        raise ConnectionFailed(reason)
