"""Fuzz the broker with frames captured from real client traffic, mutated; it must never crash.

The broker advertises a recording proxy (advertised.listeners), so every
connection of a real producer, share consumer, plain consumer and consumer
group member (classic and KIP-848) passes through it and each request frame
is captured. Then, for a bounded time,
mutated copies (bytes flipped, truncated, extended, length or version
changed) and random frames are sent on fresh connections. Afterwards the
broker must still be alive, answer ApiVersions, serve a real share consumer,
and stop cleanly. Failures print "reproduce with seed=..." (set KIPCHECK_FUZZ_SEED).
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import pytest

from confluent_kafka import Consumer

from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, poll_records, produce, read_plain, share_consumer
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.runner import judge_traces
from kipcheck.oracle.conformance.probes.raw_client import RawClient

pytestmark = pytest.mark.slow

FUZZ_SECONDS = 20.0


class RecordingProxy:
    """Forwards loopback connections to the broker and records the request frames clients send."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.frames: list[bytes] = []
        self.target_port = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump_requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump_requests(self, source, sink):
        buffer = b""
        try:
            while data := source.recv(65536):
                sink.sendall(data)
                buffer += data
                while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack_from(">i", buffer)[0]:
                    size = 4 + struct.unpack_from(">i", buffer)[0]
                    self.frames.append(buffer[:size])
                    buffer = buffer[size:]
        except OSError:
            pass
        finally:
            sink.close()

    def _pump(self, source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def close(self):
        self.listener.close()


def mutate(frame: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(7)
    body = bytearray(frame[4:])
    if kind == 0 and body:                                 # flip a few bytes
        for _ in range(rng.randint(1, 5)):
            body[rng.randrange(len(body))] = rng.randrange(256)
    elif kind == 1:                                        # truncate the body, keep the length honest
        body = body[:rng.randrange(len(body) + 1)]
    elif kind == 2:                                        # append garbage
        body += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif kind == 3 and len(body) >= 4:                     # another API version
        struct.pack_into(">h", body, 2, rng.randint(-2, 20))
    elif kind == 4:                                        # a lying length prefix
        return struct.pack(">i", rng.choice([len(body) + rng.randint(1, 100), rng.randint(-10, 7), 2**31 - 1])) + bytes(body)
    elif kind == 5:                                        # random bytes after a real header
        body = body[:8] + bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    else:                                                  # wholly random
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    return struct.pack(">i", len(body)) + bytes(body)


def capture_real_traffic(bootstrap: str) -> None:
    create_topic(bootstrap, "fuzz", 2)
    produce(bootstrap, "fuzz", [(index % 2, b"k", f"v{index}".encode()) for index in range(20)],
            **{"compression.type": "lz4", "enable.idempotence": True})
    consumer = share_consumer(bootstrap, "fuzzers", ["fuzz"])
    deadline, received = time.monotonic() + 60, 0
    while received < 20 and time.monotonic() < deadline:
        received += len(poll_records(consumer))
    consumer.commit_sync(30)
    consumer.close()
    read_plain(bootstrap, "fuzz", 2, 20)
    for protocol in ("classic", "consumer"):  # consumer-group traffic: JoinGroup ... OffsetCommit, ConsumerGroupHeartbeat
        member = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fuzz-{protocol}", "group.protocol": protocol,
                           "auto.offset.reset": "earliest", **QUIET})
        member.subscribe(["fuzz"])
        received, deadline = 0, time.monotonic() + 60
        while received < 20 and time.monotonic() < deadline:
            message = member.poll(0.5)
            received += message is not None and message.error() is None
        member.commit(asynchronous=False)
        member.close()


def send_and_drain(port: int, frame: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=0.2) as connection:
        try:
            connection.sendall(frame)
            connection.recv(65536)
        except OSError:
            pass  # a closed connection or a slow answer are both fine; a crash is not


def test_mutated_and_random_frames_never_crash_the_broker(tmp_path):
    seed = int(os.environ.get("KIPCHECK_FUZZ_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    proxy = RecordingProxy()
    settings = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}", "share.auto.offset.reset": "earliest",
                "group.share.heartbeat.interval.ms": "1000", "group.initial.rebalance.delay.ms": "0"}
    try:
        with EmbeddedBroker(tmp_path, settings) as broker:
            proxy.target_port = broker.port
            capture_real_traffic(f"127.0.0.1:{proxy.port}")
            captured = list(proxy.frames)
            api_keys = {struct.unpack_from(">h", frame, 4)[0] for frame in captured}
            assert {0, 3, 8, 9, 11, 14, 18, 68, 76, 78} <= api_keys, f"captured api keys {sorted(api_keys)}"
            sent, deadline = 0, time.monotonic() + FUZZ_SECONDS
            while time.monotonic() < deadline:
                send_and_drain(broker.port, mutate(rng.choice(captured), rng))
                sent += 1
                assert broker.alive(), f"broker died after {sent} fuzz frames; reproduce with seed={seed}"
            client = RawClient(broker.port)
            answer = client.request(18, 3, client_software_name="fuzz", client_software_version="1")
            client.close()
            assert answer is not None and answer.error_code == 0, f"no ApiVersions answer; reproduce with seed={seed}"
            assert len(read_plain(broker.bootstrap, "fuzz", 2, 20)) == 20
            assert broker.stop() == 0, f"unclean stop; reproduce with seed={seed}\n{broker.log_tail()}"
            assert "Traceback" not in broker.log_path.read_text(), f"a handler failed; reproduce with seed={seed}"
            # Fuzz connections open sessions and vanish: their closes are traced as `disconnect` (SS-17),
            # so every trace is judged, share-session ones included.
            judged = judge_traces(broker.trace_dir)
            assert "share-session" in {verdict.machine for verdict in judged}
            assert all(verdict.status == "ok" for verdict in judged), \
                "\n".join(verdict.summary() for verdict in judged) + f"\nreproduce with seed={seed}"
        print(f"{sent} fuzz frames from {len(captured)} captured ones (seed={seed})")
    finally:
        proxy.close()

