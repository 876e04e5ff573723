"""The asyncio server: connections, framing, pipelined in-order answers, size limits.

Each connection reads frames (a 4-byte big-endian length, then the request)
and starts one handler task per request, so a long-polling fetch does not stop
the connection from reading; a writer task sends the answers in request order
(Kafka's guarantee to pipelining clients). At most `MAX_PIPELINED` requests
wait for their answer per connection; the reader then waits.

When the peer closes, requests it has not been answered are cancelled (a
long-polling fetch does not outlive its connection) before the broker is told
the connection closed.

What closes a connection (logged; the broker keeps serving the others):
- a frame length below the header size or above `max_request_bytes`
  (Kafka's `socket.request.max.bytes`);
- a frame kio cannot decode, or with trailing bytes;
- an API key or version the broker does not serve, except ApiVersions, which
  gets a v0 answer with UNSUPPORTED_VERSION and the supported versions (so a
  client can pick one, as Kafka does);
- a handler that fails unexpectedly (its traceback is logged).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import traceback
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from kipcheck.impl.broker.codec import API_VERSIONS_KEY, FrameError, Request, UnsupportedApi, build, decode_request, encode_response, response_class

log = logging.getLogger("kipcheck.broker")

MAX_PIPELINED = 64
NO_RESPONSE = object()  # a handler's answer when Kafka sends none (Produce with acks=0)


@dataclass(eq=False)
class Connection:
    """One client connection; handlers may keep per-connection facts in `attachments`."""

    connection_id: int
    peer: str
    attachments: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[Connection, Request], Awaitable[Any]]


class Server:
    """Serves `handlers` ({api_key: (min version, max version, handler)}) on host:port.

    A handler returns the response body (a kio response of the request's
    version) or NO_RESPONSE. `on_close(connection)` runs when a connection ends.
    """

    def __init__(self, handlers: dict[int, tuple[int, int, Handler]], max_request_bytes: int,
                 on_close: Callable[[Connection], None]):
        self.handlers = handlers
        self.supported = {key: (low, high) for key, (low, high, _) in handlers.items()}
        self.max_request_bytes = max_request_bytes
        self.on_close = on_close
        self.server: asyncio.AbstractServer | None = None
        self.connection_ids = itertools.count(1)
        self.connections: set[asyncio.Task] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, host, port, limit=1 << 20)
        bound_host, bound_port = self.server.sockets[0].getsockname()[:2]
        return bound_host, bound_port

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for task in list(self.connections):
                task.cancel()
            await asyncio.gather(*self.connections, return_exceptions=True)
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections.add(asyncio.current_task())
        peer = writer.get_extra_info("peername")
        connection = Connection(next(self.connection_ids), f"{peer[0]}:{peer[1]}" if peer else "?")
        answers: asyncio.Queue = asyncio.Queue(MAX_PIPELINED)
        sender = asyncio.create_task(self._send(answers, writer, connection))
        try:
            while not sender.done():
                request = await self._read_request(reader, connection)
                if request is None:
                    break
                await answers.put(request if isinstance(request, bytes) else asyncio.create_task(self._answer(connection, request)))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            try:
                await self._finish(answers, sender, writer)
            except asyncio.CancelledError:
                pass  # stop() cancelled this task while it was closing: on_close must still run
            self.connections.discard(asyncio.current_task())
            try:
                self.on_close(connection)
            except Exception:
                log.error("closing connection %s failed:\n%s", connection.peer, traceback.format_exc())

    async def _read_request(self, reader: asyncio.StreamReader, connection: Connection) -> Request | bytes | None:
        """The next request, a ready answer (bytes), or None to close the connection."""
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        if not 8 <= size <= self.max_request_bytes:
            log.warning("closing %s: frame length %d outside 8..%d", connection.peer, size, self.max_request_bytes)
            return None
        frame = await reader.readexactly(size)
        try:
            return decode_request(frame, self.supported)
        except UnsupportedApi as error:
            if error.api_key == API_VERSIONS_KEY:
                return self._unsupported_api_versions(error.correlation_id)
            log.warning("closing %s: %s", connection.peer, error)
        except FrameError as error:
            log.warning("closing %s: malformed request: %s", connection.peer, error)
        return None

    async def _answer(self, connection: Connection, request: Request) -> bytes | object | None:
        _, _, handler = self.handlers[request.api_key]
        try:
            body = await handler(connection, request)
            if body is NO_RESPONSE:
                return NO_RESPONSE
            return encode_response(request.api_key, request.api_version, request.correlation_id, body)
        except Exception:
            log.error("closing %s: api key %d v%d failed:\n%s", connection.peer, request.api_key,
                      request.api_version, traceback.format_exc())
            return None

    async def _send(self, answers: asyncio.Queue, writer: asyncio.StreamWriter, connection: Connection) -> None:
        try:
            while (item := await answers.get()) is not None:
                frame = item if isinstance(item, bytes) else await item
                if frame is None:
                    break
                if frame is not NO_RESPONSE:
                    writer.write(frame)
                    await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _finish(self, answers: asyncio.Queue, sender: asyncio.Task, writer: asyncio.StreamWriter) -> None:
        """The peer is gone (or broke the protocol): cancel what was never answered, then close."""
        sender.cancel()
        while not answers.empty():
            item = answers.get_nowait()
            if isinstance(item, asyncio.Task):
                item.cancel()
                await asyncio.gather(item, return_exceptions=True)
        await asyncio.gather(sender, return_exceptions=True)
        writer.close()

    def _unsupported_api_versions(self, correlation_id: int) -> bytes:
        body = build(response_class(API_VERSIONS_KEY, 0), error_code="UNSUPPORTED_VERSION",
                     api_keys=api_version_list(self.supported))
        return encode_response(API_VERSIONS_KEY, 0, correlation_id, body)


def api_version_list(supported: dict[int, tuple[int, int]]) -> list[dict]:
    return [{"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in sorted(supported.items())]
