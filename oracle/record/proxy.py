"""The proxy: a Kafka-protocol listener per broker, bytes forwarded unchanged, answers in order, addresses rewritten.

    proxy = Proxy([("127.0.0.1", 9092)], "127.0.0.1", 19092, RecordSettings(), observer)
    await proxy.start()          # listening on 19092 for the broker at 9092 (19093 for the next one, ...)
    ...
    await proxy.stop()           # connections closed, every observation handed to the observer

Each client connection gets its own connection to the broker its listener stands for. Requests are forwarded
as they come, byte for byte; the broker answers them in order (Kafka's guarantee to pipelining clients), and
each answer is matched with the oldest request waiting for one (Produce with acks=0 waits for none). An answer
that may name a broker (addresses.NAMING_BROKERS) and holds an upstream host's name is decoded with kio,
rewritten to the proxy's listeners, and encoded again; every other answer is forwarded as it came.

The observer (observe.Observer) says which APIs it reads (`wants`); their requests and answers are decoded and
queued for it as Exchanges, in the order the answers came. The bytes the proxy holds (frames being forwarded,
exchanges waiting to be observed) are counted against `queued.max.request.bytes`, in all and per connection
(RecordSettings): a request is read only when it fits (an answer is always read, since the requests it
answers hold room), so a slow observer slows the clients down, and never loses an exchange;
an answer larger than `record.observe.max.bytes` or one kio cannot decode is forwarded unread and the observer
is told what it missed (`missed`).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from kipcheck.impl.broker.limits import FramePool
from kipcheck.impl.consumer.connection import decode_response
from kipcheck.impl.wire.codec import FrameError, decode_request, encode_response
from kipcheck.oracle.record.addresses import BrokerMap, rewrite
from kipcheck.oracle.record.settings import RecordSettings

log = logging.getLogger("kipcheck.record")

PRODUCE = 0
STREAM_BUFFER_BYTES = 1 << 20


@dataclass(eq=False)
class Link:
    """One client connection and the broker it is paired with."""

    link_id: int
    peer: str
    broker: tuple[str, int]
    frames: FramePool
    facts: dict[str, Any] = field(default_factory=dict)  # what the observer keeps about the connection


@dataclass(eq=False)
class Exchange:
    """One request and its answer as they crossed the proxy; `sent_ms` and `received_ms` on the proxy's clock."""

    link: Link
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    sent_ms: int
    frame: bytes | None = None        # the request frame, kept when the observer reads this API
    request: Any = None               # decoded (kio) when the observer reads it
    response: Any = None
    received_ms: int = 0
    size: int = 0                     # the bytes this exchange holds in the pools


class Observer(Protocol):
    def wants(self, api_key: int) -> bool: ...
    def sent(self, exchange: Exchange) -> None: ...
    def observe(self, exchange: Exchange) -> None: ...
    def missed(self, exchange: Exchange, reason: str) -> None: ...
    def closed(self, link: Link, at_ms: int) -> None: ...
    def settled(self, before_ms: int | None) -> None: ...


class Pending:
    """The send times of the exchanges the observer reads that it has not read yet (sent, maybe answered)."""

    def __init__(self) -> None:
        self._times: list[int] = []
        self._done: dict[int, int] = {}

    def add(self, sent_ms: int) -> None:
        heapq.heappush(self._times, sent_ms)

    def done(self, sent_ms: int) -> None:
        self._done[sent_ms] = self._done.get(sent_ms, 0) + 1

    def earliest(self) -> int | None:
        """The earliest send time still pending (None: none is)."""
        while self._times and self._done.get(self._times[0]):
            sent_ms = heapq.heappop(self._times)
            self._done[sent_ms] -= 1
            if not self._done[sent_ms]:
                del self._done[sent_ms]
        return self._times[0] if self._times else None


class ProxyError(Exception):
    """A connection the proxy closes (its message says why)."""


class Proxy:
    def __init__(self, upstreams: list[tuple[str, int]], listen_host: str, listen_port: int,
                 settings: RecordSettings, observer: Observer):
        self.settings = settings
        self.observer = observer
        self.brokers = BrokerMap(listen_host)
        self.brokers.on_new = self._listen_for_new
        self._upstreams = upstreams
        self._listen_port = listen_port
        self._servers: list[asyncio.AbstractServer] = []
        self._links: set[asyncio.Task] = set()
        self._link_ids = 0
        self._started = time.monotonic()
        self.frames = FramePool(settings.queued_max_bytes)
        self.connections = asyncio.Semaphore(settings.max_connections)
        self.observations: asyncio.Queue = asyncio.Queue()
        self._observing: asyncio.Task | None = None
        self.pending = Pending()

    def now_ms(self) -> int:
        return int((time.monotonic() - self._started) * 1000)

    @property
    def listening(self) -> list[tuple[int, str, int]]:
        """(listen port, upstream host, upstream port) of every listener, in the order they were opened."""
        return list(self.brokers.entries)

    async def start(self) -> None:
        self._observing = asyncio.create_task(self._observe_forever())
        for host, port in self._upstreams:
            self._listen_for_new(host, port)

    def _listen_for_new(self, host: str, port: int) -> int:
        """Open a listener for the broker at host:port (the next port after the first listener's, or a free one
        when that was 0); its port."""
        wanted = self._listen_port + len(self.brokers.entries) if self._listen_port else 0
        listener = socket.create_server((self.brokers.listen_host, wanted), backlog=128)
        listener.setblocking(False)
        listen_port = listener.getsockname()[1]
        self.brokers.add(host, port, listen_port)
        task = asyncio.get_running_loop().create_task(
            asyncio.start_server(lambda r, w: self._accept(r, w, (host, port)), sock=listener,
                                 limit=STREAM_BUFFER_BYTES))
        task.add_done_callback(lambda done: self._servers.append(done.result()))
        log.info("listening on %s:%d for %s:%d", self.brokers.listen_host, listen_port, host, port)
        return listen_port

    async def stop(self) -> None:
        """Stop listening, close every connection, and wait until the observer has read every exchange."""
        for server in self._servers:
            server.close()
        for task in list(self._links):
            task.cancel()
        await asyncio.gather(*self._links, return_exceptions=True)
        await self.observations.join()
        if self._observing is not None:
            self._observing.cancel()
            await asyncio.gather(self._observing, return_exceptions=True)

    # -- connections ---------------------------------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, broker: tuple[str, int]) -> None:
        task = asyncio.create_task(self._serve(reader, writer, broker))
        self._links.add(task)
        task.add_done_callback(self._links.discard)

    async def _serve(self, client_reader, client_writer, broker: tuple[str, int]) -> None:
        peer = "%s:%d" % client_writer.get_extra_info("peername")[:2]
        upstream_writer = None
        async with self.connections:
            self._link_ids += 1
            link = Link(self._link_ids, peer, broker, FramePool(self.settings.connection_queued_max_bytes))
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(*broker, limit=STREAM_BUFFER_BYTES)
                upstream_writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                client_writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                waiting: deque[Exchange] = deque()
                in_flight = asyncio.Semaphore(self.settings.max_in_flight)
                directions = [asyncio.create_task(self._requests(link, client_reader, upstream_writer, waiting,
                                                                 in_flight)),
                              asyncio.create_task(self._answers(link, upstream_reader, client_writer, waiting,
                                                                in_flight))]
                try:
                    done, _ = await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        if isinstance(task.exception(), ProxyError):
                            log.warning("closing %s (for %s:%d): %s", peer, *broker, task.exception())
                        elif task is directions[1]:
                            link.facts["closed_by_broker"] = True
                finally:
                    for task in directions:
                        task.cancel()
                    await asyncio.gather(*directions, return_exceptions=True)
            except OSError as error:
                log.warning("closing %s: cannot reach the broker %s:%d: %s", peer, *broker, error)
            finally:
                for writer in (client_writer, upstream_writer):
                    if writer is not None:
                        writer.close()
                for exchange in waiting if upstream_writer is not None else ():  # never answered
                    if exchange.frame is not None:
                        self.pending.done(exchange.sent_ms)
                        self._release(link, exchange.size)
                await self.observations.put((self._closed, link, self.now_ms()))

    def _closed(self, link: Link, at_ms: int) -> None:
        self.observer.closed(link, at_ms)

    async def _requests(self, link: Link, reader, writer, waiting: deque, in_flight: asyncio.Semaphore) -> None:
        while True:
            size = await _read_size(reader, self.settings.max_request_bytes, "request", minimum=8)
            await self._reserve(link, size)
            frame = await reader.readexactly(size)
            api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
            wanted = self.observer.wants(api_key)
            if _answered(api_key, api_version, frame):
                await in_flight.acquire()
                exchange = Exchange(link, api_key, api_version, correlation_id, _client_id(frame), self.now_ms(),
                                    frame if wanted else None, size=size if wanted else 0)
                waiting.append(exchange)
                if wanted:
                    self.pending.add(exchange.sent_ms)
                    self.observer.sent(exchange)
            writer.write(struct.pack(">i", size) + frame)
            if not (wanted and waiting and waiting[-1].frame is frame):
                self._release(link, size)
            await writer.drain()

    async def _answers(self, link: Link, reader, writer, waiting: deque, in_flight: asyncio.Semaphore) -> None:
        while True:
            size = await _read_size(reader, self.settings.max_response_bytes, "answer", minimum=4)
            self._hold(link, size)  # answers never wait for room (their requests may hold it): requests do
            frame = await reader.readexactly(size)
            if not waiting:
                raise ProxyError("the broker answered a request it was not sent")
            exchange = waiting.popleft()
            in_flight.release()
            exchange.received_ms = self.now_ms()
            (correlation_id,) = struct.unpack_from(">i", frame)
            if correlation_id != exchange.correlation_id:
                raise ProxyError(f"answer {correlation_id} came where {exchange.correlation_id} was due")
            exchange.size += size
            frame = self._read_answer(exchange, frame)
            writer.write(struct.pack(">i", len(frame)) + frame)
            if exchange.frame is not None:
                await self.observations.put((self._observe, exchange))
            else:
                self._release(link, exchange.size)
            await writer.drain()

    def _read_answer(self, exchange: Exchange, frame: bytes) -> bytes:
        """The answer frame to send on (rewritten where it names a broker); decodes what the observer reads."""
        api_key, version = exchange.api_key, exchange.api_version
        names_brokers = self.brokers.may_name_broker(api_key, version, frame)
        if not names_brokers and exchange.frame is None:
            return frame
        if exchange.frame is not None and len(frame) > self.settings.observe_max_bytes and not names_brokers:
            self._miss(exchange, f"answers above record.observe.max.bytes ({self.settings.observe_max_bytes})")
            return frame
        try:
            _, exchange.response = decode_response(api_key, version, frame)
        except Exception as error:  # kio raises many types on what it cannot read
            log.warning("api key %d v%d: an answer kio cannot decode (%s: %s): forwarded as it came", api_key,
                        version, type(error).__name__, error)
            self._miss(exchange, "answers kio cannot decode")
            return frame
        if not names_brokers:
            return frame
        rewritten = rewrite(exchange.response, self.brokers.listener_of)
        if rewritten is exchange.response:
            return frame
        exchange.response = rewritten
        return encode_response(api_key, version, exchange.correlation_id, rewritten)[4:]

    def _miss(self, exchange: Exchange, reason: str) -> None:
        exchange.frame, exchange.response = None, None
        self._release(exchange.link, exchange.size)
        exchange.size = 0
        self.observations.put_nowait((self._missed, exchange, reason))

    def _missed(self, exchange: Exchange, reason: str) -> None:
        self.pending.done(exchange.sent_ms)
        self.observer.missed(exchange, reason)

    async def _reserve(self, link: Link, size: int) -> None:
        await link.frames.reserve(size)
        try:
            await self.frames.reserve(size)
        except BaseException:
            link.frames.release(size)
            raise

    def _hold(self, link: Link, size: int) -> None:
        link.frames.used_bytes += size
        self.frames.used_bytes += size

    def _release(self, link: Link, size: int) -> None:
        if size:
            link.frames.release(size)
            self.frames.release(size)

    # -- the observer's side ------------------------------------------------------------------

    def _observe(self, exchange: Exchange) -> None:
        try:
            exchange.request = decode_request(exchange.frame, {exchange.api_key: (exchange.api_version,) * 2}).body
        except FrameError as error:
            self.observer.missed(exchange, f"requests kio cannot decode ({error})")
            return
        self.observer.observe(exchange)

    async def _observe_forever(self) -> None:
        while True:
            work, *arguments = await self.observations.get()
            try:
                work(*arguments)
            except Exception as error:  # a bug of ours: said, and what it concerned is no longer followed
                log.exception("observing failed")
                if work == self._observe:
                    self.observer.missed(arguments[0], f"exchanges the observer failed on ({type(error).__name__})")
            finally:
                if work == self._observe:
                    exchange = arguments[0]
                    exchange.frame = exchange.response = exchange.request = None
                    self._release(exchange.link, exchange.size)
                    self.pending.done(exchange.sent_ms)
                self.observer.settled(self.pending.earliest())
                self.observations.task_done()


async def _read_size(reader: asyncio.StreamReader, maximum: int, what: str, minimum: int) -> int:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    if not minimum <= size <= maximum:
        raise ProxyError(f"a {what} frame of {size} bytes (allowed {minimum} to {maximum})")
    return size


def _client_id(frame: bytes) -> str | None:
    (length,) = struct.unpack_from(">h", frame, 8)
    return None if length < 0 else frame[10:10 + length].decode("utf-8", "replace")


def _answered(api_key: int, api_version: int, frame: bytes) -> bool:
    """False for a Produce with acks=0, which Kafka never answers."""
    if api_key != PRODUCE or api_version < 3:
        return True  # Produce v0-v2 carry acks first too, but no client this proxy serves sends them
    (length,) = struct.unpack_from(">h", frame, 8)
    offset = 10 + max(length, 0)
    if api_version >= 9:  # flexible: the header's tagged fields, then a compact nullable transactional id
        tags, offset = _varint(frame, offset)
        for _ in range(tags):
            _, offset = _varint(frame, offset)
            tag_size, offset = _varint(frame, offset)
            offset += tag_size
        string_length, offset = _varint(frame, offset)
        offset += max(string_length - 1, 0)
    else:
        (string_length,) = struct.unpack_from(">h", frame, offset)
        offset += 2 + max(string_length, 0)
    (acks,) = struct.unpack_from(">h", frame, offset)
    return acks != 0


def _varint(frame: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = frame[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
