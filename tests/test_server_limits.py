"""The server's limits, in-process: frame pools, idle connections, connection caps.

Each test runs impl/broker/server.Server on a free loopback port with one
ApiVersions handler that waits for the test's go-ahead, so the test sees
exactly which requests the server has read and started. "Not started" is
checked after SETTLE_S: a server that wrongly reads ahead has had ample time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct

import pytest
from kio.index import load_request_schema
from kipcheck.impl.broker.config import BrokerConfig
from kipcheck.impl.broker.limits import FramePool
from kipcheck.impl.broker.server import Server
from kipcheck.impl.consumer.connection import encode_entity
from kipcheck.impl.wire.codec import build, reply

SETTLE_S = 0.5
DEADLINE_S = 30


class Harness:
    """A Server whose ApiVersions answers wait for `go`; `started` lists correlation ids as handlers start."""

    def __init__(self, **settings):
        self.config = dataclasses.replace(BrokerConfig(), **settings)
        self.started: list[int] = []
        self.go = asyncio.Event()
        self.closed = 0
        self.server = Server({18: (3, 3, self.handle)}, self.config, self.on_close)

    async def handle(self, connection, request):
        self.started.append(request.correlation_id)
        await self.go.wait()
        return reply(request, error_code="NONE", api_keys=[], throttle_time=0)

    def on_close(self, connection):
        self.closed += 1

    async def __aenter__(self):
        _, self.port = await self.server.start("127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc):
        self.go.set()
        await self.server.stop()

    async def connect(self):
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def wait_started(self, count: int) -> None:
        async with asyncio.timeout(DEADLINE_S):
            while len(self.started) < count:
                await asyncio.sleep(0.01)


def api_versions_frame(correlation_id: int, padding_bytes: int = 0) -> bytes:
    """An ApiVersions v3 frame, made `padding_bytes` longer by its client software name."""
    body = build(load_request_schema(18, 3), client_software_name="x" * (1 + padding_bytes), client_software_version="1")
    return encode_entity(body, correlation_id, "kipcheck-test")


async def read_answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    """The correlation ids of the next `count` answers."""
    ids = []
    async with asyncio.timeout(DEADLINE_S):
        for _ in range(count):
            size, correlation_id = struct.unpack(">ii", await reader.readexactly(8))
            await reader.readexactly(size - 4)
            ids.append(correlation_id)
    return ids


@pytest.mark.parametrize("share_bytes, paddings", [
    (16384, [10000, 10000, 10000]),  # 2 x 10 KB do not fit in 16 KiB: the connection reads no further
    (1000, [5000, 0]),               # a frame larger than the share is read, alone
])
def test_a_connection_holds_at_most_its_share_of_frame_bytes(share_bytes, paddings):
    async def scenario():
        async with Harness(connection_queued_max_request_bytes=share_bytes) as harness:
            reader, writer = await harness.connect()
            writer.write(b"".join(api_versions_frame(index + 1, padding) for index, padding in enumerate(paddings)))
            await harness.wait_started(1)
            await asyncio.sleep(SETTLE_S)
            assert harness.started == [1]
            harness.go.set()
            assert await read_answers(reader, len(paddings)) == list(range(1, len(paddings) + 1))
            writer.close()

    asyncio.run(scenario())


def test_the_broker_wide_pool_makes_other_connections_wait():
    async def scenario():
        async with Harness(max_request_bytes=16384, queued_max_request_bytes=16384) as harness:
            first_reader, first = await harness.connect()
            second_reader, second = await harness.connect()
            first.write(api_versions_frame(1, 10000))
            await harness.wait_started(1)
            second.write(api_versions_frame(2, 10000))
            await asyncio.sleep(SETTLE_S)
            assert harness.started == [1] and harness.server.frames.used_bytes > 10000
            harness.go.set()
            assert await read_answers(first_reader, 1) == [1] and await read_answers(second_reader, 1) == [2]
            assert harness.server.frames.used_bytes == 0
            first.close()
            second.close()

    asyncio.run(scenario())


def test_an_idle_connection_is_closed_but_one_waiting_for_an_answer_is_not():
    async def scenario():
        async with Harness(connections_max_idle_ms=300) as harness:
            idle_reader, idle = await harness.connect()
            busy_reader, busy = await harness.connect()
            busy.write(api_versions_frame(1))
            await harness.wait_started(1)
            async with asyncio.timeout(DEADLINE_S):
                assert await idle_reader.read() == b""  # closed by the server
            await asyncio.sleep(SETTLE_S)  # longer than the idle time, while its answer is pending
            harness.go.set()
            assert await read_answers(busy_reader, 1) == [1]
            busy.close()

    asyncio.run(scenario())


def test_max_connections_closes_the_longest_idle_or_waits_and_per_ip_drops():
    """At max.connections a new connection closes the one idle the longest (one trickling a frame in counts as
    idle); when every connection has a request being handled it waits for a slot. Before: it always waited,
    so connections trickling one byte of a frame now and then locked every new client out."""
    async def scenario():
        async with Harness(max_connections=2) as harness:
            (first_reader, first), (second_reader, second) = await harness.connect(), await harness.connect()
            first.write(api_versions_frame(1)[:5])  # one byte of the frame after its length: idle
            second.write(api_versions_frame(2))     # handled until `go`: busy
            await harness.wait_started(1)
            third_reader, third = await harness.connect()
            async with asyncio.timeout(DEADLINE_S):
                assert await first_reader.read() == b"", "the idle connection is closed"
            third.write(api_versions_frame(3))
            await harness.wait_started(2)
            fourth_reader, fourth = await harness.connect()  # the other two are busy: it waits
            fourth.write(api_versions_frame(4))
            await asyncio.sleep(SETTLE_S)
            assert harness.started == [2, 3]
            harness.go.set()
            assert await read_answers(second_reader, 1) == [2] and await read_answers(third_reader, 1) == [3]
            assert await read_answers(fourth_reader, 1) == [4], "room was made by closing one idle again"
            for writer in (second, third, fourth):
                writer.close()
        async with Harness(max_connections_per_ip=1) as harness:
            harness.go.set()
            _, first = await harness.connect()
            second_reader, second = await harness.connect()
            async with asyncio.timeout(DEADLINE_S):
                assert await second_reader.read() == b""  # dropped at once
            first.close()
            second.close()

    asyncio.run(scenario())


def test_frame_pool_grants_in_arrival_order_and_survives_cancellation():
    async def scenario():
        pool = FramePool(100)
        await pool.reserve(60)
        big = asyncio.create_task(pool.reserve(80))
        await asyncio.sleep(0)
        small = asyncio.create_task(pool.reserve(10))  # would fit now, but waits behind the big one
        await asyncio.sleep(0)
        assert not big.done() and not small.done() and pool.used_bytes == 60
        pool.release(60)
        await asyncio.gather(big, small)
        assert pool.used_bytes == 90
        waiting = asyncio.create_task(pool.reserve(50))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        pool.release(90)
        assert pool.used_bytes == 0
        await pool.reserve(500)  # larger than the pool: admitted alone
        assert pool.used_bytes == 500

    asyncio.run(scenario())


def test_frames_trickled_in_cannot_hold_the_broker_wide_pool():
    """Two connections announce frames of 60% of queued.max.request.bytes each and send a few bytes of them:
    the first holds its bytes, the second waits for room, and every frame after it waits behind it. A frame
    that arrives slower than queued.request.min.bytes.per.second while others wait is closed, and the
    waiting request is read. Before: it waited until connections.max.idle.ms (10 minutes)."""
    async def scenario():
        async with Harness(max_request_bytes=100_000, queued_max_request_bytes=100_000) as harness:
            harness.go.set()
            tricklers = []
            for correlation_id in (1, 2):
                reader, writer = await harness.connect()
                writer.write(api_versions_frame(correlation_id, 60_000)[:20])
                tricklers.append((reader, writer))
                await asyncio.sleep(0.1)
            reader, writer = await harness.connect()
            writer.write(api_versions_frame(3, 30_000))
            assert await read_answers(reader, 1) == [3]
            async with asyncio.timeout(DEADLINE_S):
                assert await tricklers[0][0].read() == b"", "the trickler holding the bytes is closed"
            assert not tricklers[1][0].at_eof(), "the other now holds them, and nobody waits for room"
            for _, trickler_writer in tricklers:
                trickler_writer.close()
            writer.close()

    asyncio.run(scenario())
