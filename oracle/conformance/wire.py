"""RawClient: a Kafka wire client built on kio, for requests no real client would send (tests, probes, fuzzing).

    client = RawClient(port)
    answer = client.request(78, 1, group_id="g", member_id="m", ...)   # a kio response body, or None if closed
    client.send(b"...")                                                  # raw bytes
    client.closed_by_peer()

Request bodies are plain values, built by impl/broker/codec.build; frames are
encoded and decoded as impl/consumer's BrokerConnection does.
"""

from __future__ import annotations

import socket
import struct

from kipcheck.impl.consumer.connection import decode_response, encode_request


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
