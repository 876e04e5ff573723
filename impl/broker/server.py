"""The asyncio server: connections, framing, pipelined in-order answers, limits.

Each connection reads frames (a 4-byte big-endian length, then the request)
and starts one handler task per request, so a long-polling fetch does not stop
the connection from reading; a writer task sends the answers in request order
(Kafka's guarantee to pipelining clients). At most `MAX_PIPELINED` requests
wait for their answer per connection; the reader then waits.

When the peer closes, requests it has not been answered are cancelled (a
long-polling fetch does not outlive its connection) before the broker is told
the connection closed.

Limits (BrokerConfig, Kafka's names; limits.py):
- `max.connections`: a new connection closes the one idle the longest (Kafka's
  KIP-402 eviction), or waits for a free slot when every connection has a
  request being handled, so connections that trickle a frame in, or do
  nothing, cannot lock new clients out; `max.connections.per.ip`: a
  connection beyond it is closed at once;
- `queued.max.request.bytes` and `queued.max.request.bytes.per.connection`: a
  frame's length is reserved before its body is read, and the connection
  reads nothing until it fits; the bytes are freed when the answer is ready,
  or when its handler starts to wait (release_frame: a long poll, a JoinGroup
  waiting for its rebalance), as Kafka frees a request's buffer once it is
  dispatched;
- `connections.max.idle.ms`: a connection with no request being handled that
  has completed no frame and been sent no answer for that long is closed (a
  frame trickling in counts as idle). A watchdog looks IDLE_CHECKS_PER_PERIOD
  times a period, at least once a second, so no timer is armed per read;
- `queued.request.min.bytes.per.second` (this broker's own): while a reader
  waits for room in `queued.max.request.bytes`, a connection whose frame has
  arrived slower than this since its bytes were granted is closed, so frames
  trickled in cannot hold the pool and lock every large request out.

Frames above INLINE_DECODE_BYTES are decoded, and their answers encoded, on
the broker's worker threads (`num.io.threads`), so a large request does not
keep the event loop from serving the other connections meanwhile.

What closes a connection (logged; the broker keeps serving the others):
- a frame length below the header size or above `max_request_bytes`
  (Kafka's `socket.request.max.bytes`);
- a frame kio cannot decode, or that claims more than it
  holds (frame_check), or whose decoded form would hold more than
  `queued.max.request.bytes.per.connection` (frame_check's estimate: Kafka
  decodes anything that fits its frame, but kio's objects take eight times
  the bytes of a small element);
- an API key or version the broker does not serve, except ApiVersions, which
  gets a v0 answer with UNSUPPORTED_VERSION and the supported versions (so a
  client can pick one, as Kafka does);
- idleness (above), or a handler that fails unexpectedly (its traceback is logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import itertools
import logging
import socket
import struct
import time
import traceback
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from kipcheck.impl.broker.config import BrokerConfig
from kipcheck.impl.broker.limits import ConnectionSlots, FramePool
from kipcheck.impl.wire.codec import API_VERSIONS_KEY, FrameError, Request, UnsupportedApi, build, decode_request, encode_response, response_class
from kipcheck.model.errors import Error

log = logging.getLogger("kipcheck.broker")

MAX_PIPELINED = 64
NO_RESPONSE = object()  # a handler's answer when Kafka sends none (Produce with acks=0)
# The request being handled: how to give its frame's bytes back to the pools (once).
_frame_release: contextvars.ContextVar[Callable[[], None]] = contextvars.ContextVar("frame_release")
STREAM_BUFFER_BYTES = 1 << 20
ACCEPT_RETRY_S = 0.1  # after an accept that failed for want of file descriptors
IDLE_CHECKS_PER_PERIOD = 4
IDLE_CHECK_MAX_S = 1.0
ROOM_CHECK_S = 0.1  # at max.connections with every connection busy, how often to look for one gone idle
INLINE_DECODE_BYTES = 64 * 1024  # a larger frame is decoded, and its answer encoded, on a worker thread


@dataclass(eq=False)
class Connection:
    """One client connection; handlers may keep per-connection facts in `attachments`."""

    connection_id: int
    peer: str
    frames: FramePool
    attachments: dict[str, Any] = field(default_factory=dict)
    active_at: float = field(default_factory=time.monotonic)  # last frame read, answer sent or request done
    handling: int = 0  # requests whose handler has not finished
    closing: str = ""  # why the broker closes it (idle, evicted, too slow), once it does
    frame_started_at: float | None = None  # the frame being read: when its bytes were granted
    frame_received: int = 0                # and how many of them have arrived


Handler = Callable[[Connection, Request], Awaitable[Any]]


class Server:
    """Serves `handlers` ({api_key: (min version, max version, handler)}) on host:port.

    A handler returns the response body (a kio response of the request's
    version) or NO_RESPONSE. `on_close(connection)` runs when a connection ends.
    """

    def __init__(self, handlers: dict[int, tuple[int, int, Handler]], config: BrokerConfig,
                 on_close: Callable[[Connection], None], workers: Executor | None = None):
        self.handlers = handlers
        self.workers = workers
        self.supported = {key: (low, high) for key, (low, high, _) in handlers.items()}
        self.config = config
        self.on_close = on_close
        self.frames = FramePool(config.queued_max_request_bytes)
        self.slots = ConnectionSlots(config.max_connections, config.max_connections_per_ip)
        self.listener: socket.socket | None = None
        self.background: list[asyncio.Task] = []  # the acceptor and the idle watchdog
        self.connection_ids = itertools.count(1)
        self.connections: dict[asyncio.Task, Connection] = {}

    async def start(self, host: str, port: int) -> tuple[str, int]:
        addresses = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, address = min(addresses, key=lambda info: info[0] != socket.AF_INET)  # IPv4 first
        self.listener = socket.create_server(address, family=family, backlog=128)
        self.listener.setblocking(False)
        self.background = [asyncio.create_task(self._accept_forever()), asyncio.create_task(self._close_idle_forever())]
        bound_host, bound_port = self.listener.getsockname()[:2]
        return bound_host, bound_port

    async def stop(self) -> None:
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)
        if self.listener is not None:
            self.listener.close()

    async def _accept_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, address = await loop.sock_accept(self.listener)
            except OSError as error:  # EMFILE/ENFILE: wait for a descriptor to be freed
                log.error("accept failed: %s", error)
                await asyncio.sleep(ACCEPT_RETRY_S if error.errno in (errno.EMFILE, errno.ENFILE) else 0)
                continue
            await self._make_room()
            if not self.slots.admit(address[0]):
                log.warning("closing %s:%d: max.connections.per.ip (%d) reached", address[0], address[1],
                            self.config.max_connections_per_ip)
                client.close()
                continue
            connection = Connection(next(self.connection_ids), f"{address[0]}:{address[1]}",
                                    FramePool(self.config.connection_queued_max_request_bytes))
            task = asyncio.create_task(self._serve(client, address, connection))
            self.connections[task] = connection
            task.add_done_callback(self.connections.pop)

    async def _make_room(self) -> None:
        """At max.connections, close the connection idle the longest (no request being handled: a frame
        trickling in counts as idle) to make room for the new one, as Kafka's KIP-402 closes the least
        recently used connection; only when every connection is busy does the new one wait for a slot."""
        while self.slots.open_connections >= self.config.max_connections:
            idle = [(connection.active_at, task) for task, connection in self.connections.items()
                    if not connection.handling and not connection.closing]
            if not idle:  # wait for a slot, or for a connection to become idle
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.slots.wait_for_slot(), ROOM_CHECK_S)
                continue
            _, task = min(idle, key=lambda pair: pair[0])
            self._close(task, f"idle the longest when max.connections ({self.config.max_connections}) was reached")
            await asyncio.gather(task, return_exceptions=True)

    async def _close_idle_forever(self) -> None:
        idle_s = self.config.connections_max_idle_ms / 1000
        while True:
            await asyncio.sleep(min(idle_s / IDLE_CHECKS_PER_PERIOD, IDLE_CHECK_MAX_S))
            now = time.monotonic()
            for task, connection in list(self.connections.items()):
                if connection.closing:
                    continue
                if not connection.handling and now - connection.active_at >= idle_s:
                    self._close(task, f"idle for {self.config.connections_max_idle_ms} ms (connections.max.idle.ms)")
                elif self.frames.waiting and self._too_slow(connection, now):
                    self._close(task, f"its frame arrives at less than "
                                      f"{self.config.queued_request_min_bytes_per_second} bytes/s while others wait "
                                      f"for queued.max.request.bytes (queued.request.min.bytes.per.second)")

    def _close(self, task: asyncio.Task, reason: str) -> None:
        self.connections[task].closing = reason
        task.cancel()

    def _too_slow(self, connection: Connection, now: float) -> bool:
        """A frame holding queued bytes that arrives slower than queued.request.min.bytes.per.second (judged
        after its first second)."""
        started = connection.frame_started_at
        if started is None or now - started < 1:
            return False
        return connection.frame_received < (now - started) * self.config.queued_request_min_bytes_per_second

    async def _serve(self, client: socket.socket, address: tuple, connection: Connection) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=client, limit=STREAM_BUFFER_BYTES)
        except (OSError, asyncio.CancelledError):
            client.close()
            self.slots.release(address[0])
            return
        answers: asyncio.Queue = asyncio.Queue(MAX_PIPELINED)
        sender = asyncio.create_task(self._send(answers, writer, connection))
        try:
            while not sender.done() and await self._read_and_start(reader, connection, answers):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            if connection.closing:
                log.warning("closing %s: %s", connection.peer, connection.closing)
        finally:
            try:
                await self._finish(answers, sender, writer)
            except asyncio.CancelledError:
                pass  # stop() cancelled this task while it was closing: on_close must still run
            self.slots.release(address[0])
            try:
                self.on_close(connection)
            except Exception:
                log.error("closing connection %s failed:\n%s", connection.peer, traceback.format_exc())

    async def _read_and_start(self, reader: asyncio.StreamReader, connection: Connection, answers: asyncio.Queue) -> bool:
        """Read one frame within the pools' bounds and queue its answer; False to close the connection."""
        size = await self._read_length(reader, connection)
        if size is None:
            return False
        await connection.frames.reserve(size)
        try:
            await self.frames.reserve(size)
        except BaseException:
            connection.frames.release(size)
            raise
        handed_off = False
        try:
            frame = await self._read_body(reader, connection, size)
            connection.active_at = time.monotonic()
            off_loop = size > INLINE_DECODE_BYTES and self.workers is not None
            request = await self._decode(frame, connection, off_loop)
            if isinstance(request, Request):
                release = _once(lambda: self._release(connection, size))
                context = contextvars.copy_context()
                context.run(_frame_release.set, release)
                task = asyncio.create_task(self._answer(connection, request, off_loop), context=context)
                connection.handling += 1
                task.add_done_callback(lambda _: self._done(connection, release))
                handed_off = True
                try:
                    await answers.put(task)
                except asyncio.CancelledError:
                    task.cancel()  # never queued: _finish would not see it
                    raise
            elif request is not None:
                await answers.put(request)
            return request is not None
        finally:
            if not handed_off:
                self._release(connection, size)

    async def _read_body(self, reader: asyncio.StreamReader, connection: Connection, size: int) -> bytes:
        """The frame's `size` bytes, a read at a time, its progress kept for the slow-frame watchdog."""
        body = bytearray()
        connection.frame_started_at, connection.frame_received = time.monotonic(), 0
        try:
            while len(body) < size:
                chunk = await reader.read(min(size - len(body), STREAM_BUFFER_BYTES))
                if not chunk:
                    raise asyncio.IncompleteReadError(bytes(body), size)
                body += chunk
                connection.frame_received = len(body)
        finally:
            connection.frame_started_at = None
        return bytes(body)

    def _release(self, connection: Connection, size: int) -> None:
        connection.frames.release(size)
        self.frames.release(size)

    def _done(self, connection: Connection, release: Callable[[], None]) -> None:
        """A handler finished: its frame's bytes are free, and the idle time starts again."""
        connection.handling -= 1
        connection.active_at = time.monotonic()
        release()

    async def _read_length(self, reader: asyncio.StreamReader, connection: Connection) -> int | None:
        """The next frame's length; None (logged) if it is out of bounds."""
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        if not 8 <= size <= self.config.max_request_bytes:
            log.warning("closing %s: frame length %d outside 8..%d (socket.request.max.bytes)", connection.peer,
                        size, self.config.max_request_bytes)
            return None
        return size

    async def _decode(self, frame: bytes, connection: Connection, off_loop: bool) -> Request | bytes | None:
        """The request, a ready answer (bytes), or None (logged) to close the connection. A large frame is
        decoded on a worker thread; one whose decoded form would take more than a connection's queued bytes
        is refused."""
        max_decoded_bytes = self.config.connection_queued_max_request_bytes
        try:
            if off_loop:
                return await asyncio.get_running_loop().run_in_executor(
                    self.workers, decode_request, frame, self.supported, max_decoded_bytes)
            return decode_request(frame, self.supported, max_decoded_bytes)
        except UnsupportedApi as error:
            if error.api_key == API_VERSIONS_KEY:
                return self._unsupported_api_versions(error.correlation_id)
            log.warning("closing %s: %s", connection.peer, error)
        except FrameError as error:
            log.warning("closing %s: malformed request: %s", connection.peer, error)
        return None

    async def _answer(self, connection: Connection, request: Request, off_loop: bool) -> bytes | object | None:
        """The answer frame; a large request's is encoded on a worker thread, as it was decoded."""
        _, _, handler = self.handlers[request.api_key]
        try:
            body = await handler(connection, request)
            if body is NO_RESPONSE:
                return NO_RESPONSE
            arguments = (request.api_key, request.api_version, request.correlation_id, body)
            if off_loop:
                return await asyncio.get_running_loop().run_in_executor(self.workers, encode_response, *arguments)
            return encode_response(*arguments)
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
                    connection.active_at = time.monotonic()
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
        body = build(response_class(API_VERSIONS_KEY, 0), error_code=Error.UNSUPPORTED_VERSION,
                     api_keys=api_version_list(self.supported))
        return encode_response(API_VERSIONS_KEY, 0, correlation_id, body)


def release_frame() -> None:
    """Called by a handler about to wait (a long-polling fetch, a JoinGroup waiting for its rebalance): its
    frame no longer counts against queued.max.request.bytes, as Kafka releases a request's buffer once its
    handler has dispatched it. Parked requests holding the pool would keep every other frame unread."""
    release = _frame_release.get(None)
    if release is not None:
        release()


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done = False

    def run() -> None:
        nonlocal done
        if not done:
            done = True
            action()
    return run


def api_version_list(supported: dict[int, tuple[int, int]]) -> list[dict]:
    return [{"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in sorted(supported.items())]
