"""`kipcheck record` as the tests run it: a subprocess in front of a cluster, its output read as it comes; and the
share consumers' workload the tests run through it.

    with Recording([("127.0.0.1", broker.port)], tmp_path / "traces") as recording:
        bootstrap = recording.bootstrap              # the proxy's first listener
        ...                                          # clients through it
        recording.wait_for("VIOLATION")              # a line it printed, waited for
    recording.exit_code, recording.output           # after SIGTERM: its summary
    done, released = share_workload(bootstrap, topic, consumers, explicit)
    tampering = TamperingBroker(broker.port, rewrite)   # a faulty broker: every ShareFetch answer's partitions
                                                        # passed through rewrite(part) -> part on their way out
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from kipcheck.oracle.conformance.scenarios.clients import poll_records, produce

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60


class Recording:
    def __init__(self, upstreams: list[tuple[str, int]], trace_dir: Path, check: bool = True,
                 settings: dict[str, str] | None = None, profile: str = "kafka-4.2", extra: list[str] = ()):
        self.command = [sys.executable, "-m", "kipcheck", "record", "--listen", "127.0.0.1:0",
                        "--trace-dir", str(trace_dir), "--profile", profile, "--log-level", "INFO",
                        *[argument for host, port in upstreams for argument in ("--upstream", f"{host}:{port}")],
                        *(["--check"] if check else []),
                        *[argument for name, value in (settings or {}).items() for argument in ("--set", f"{name}={value}")],
                        *extra]
        self.upstreams = upstreams
        self.trace_dir = trace_dir
        self.lines: list[str] = []
        self.process: subprocess.Popen | None = None
        self.exit_code: int | None = None
        self.ports: list[int] = []

    def __enter__(self) -> "Recording":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports[0]}"

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(self.ports) < len(self.upstreams):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kipcheck record did not start:\n{self.output}")
            time.sleep(0.05)

    def _read(self) -> None:
        for line in self.process.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if line.startswith("listening on "):
                self.ports.append(int(line.split()[2].rpartition(":")[2]))

    def wait_for(self, text: str, timeout_s: float = 30) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = next((line for line in self.lines if text in line), None)
            if found is not None:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not printed within {timeout_s} s:\n{self.output}")

    def stop(self) -> int:
        if self.process is not None and self.exit_code is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.exit_code = self.process.wait()
            time.sleep(0.1)  # the reader thread's last lines
        return self.exit_code

    def traces(self, machine: str) -> list[Path]:
        return sorted(self.trace_dir.glob(f"{machine}.*.jsonl"))

    def acquisitions(self) -> list[dict]:
        """The acquire steps of its share-partition traces."""
        return [step for path in self.traces("share-partition")
                for step in map(json.loads, path.read_text().splitlines()[1:]) if step["op"] == "acquire"]


def share_workload(bootstrap: str, topic: str, consumers: list, explicit, partitions: int = 2, batches: int = 10,
                   timeout_s: float = 120) -> tuple[set, set]:
    """Produce `batches` batches of ten records, spread over `partitions`, while the consumers poll, then poll until every
    record was accepted. The `explicit` consumer releases every 7th offset the first time (delivered again, with
    count 2) and accepts the rest; the others acknowledge implicitly. Closes the consumers; (accepted, released)."""
    released, done = set(), set()

    def poll(consumer):
        for message in poll_records(consumer, 0.2):
            record = (message.partition(), message.offset())
            if consumer is explicit and record[1] % 7 == 0 and record not in released:
                released.add(record)
                consumer.acknowledge(message, 2)
                continue
            if consumer is explicit:
                consumer.acknowledge(message, 1)
            done.add(record)

    for _ in range(batches):  # a batch per partition at a time, while they consume
        produce(bootstrap, topic, [(index % partitions, None, b"v%d" % index) for index in range(10)])
        for consumer in consumers:
            poll(consumer)
    deadline = time.monotonic() + timeout_s
    while len(done) < 10 * batches and time.monotonic() < deadline:
        for consumer in consumers:
            poll(consumer)
    for consumer in consumers:
        consumer.close()
    return done, released


class TamperingBroker:
    """A tampering layer in front of a broker, faking a broker bug: the partitions of every ShareFetch answer
    (kio's) go through `rewrite` on their way to the client. It is the proxy with no observer, in this process."""

    def __init__(self, broker_port: int, rewrite: Callable):
        from kipcheck.oracle.record.proxy import Proxy
        from kipcheck.oracle.record.settings import RecordSettings

        class Tampering(Proxy):
            def _read_answer(self, exchange, frame):
                frame = super()._read_answer(exchange, frame)
                return _rewritten(exchange, frame, rewrite) if exchange.api_key == SHARE_FETCH else frame

        self.loop = asyncio.new_event_loop()
        self.proxy = Tampering([("127.0.0.1", broker_port)], "127.0.0.1", 0, RecordSettings(), NoObserver())
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)
        time.sleep(0.2)  # the listener's server task
        self.port = self.proxy.listening[0][0]

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


SHARE_FETCH = 78


class NoObserver:
    def wants(self, api_key): return False
    def sent(self, exchange): pass
    def observe(self, exchange): pass
    def missed(self, exchange, reason): pass
    def closed(self, link, at_ms): pass
    def settled(self, before_ms): pass


def _rewritten(exchange, frame: bytes, rewrite: Callable) -> bytes:
    from kipcheck.impl.consumer.connection import decode_response
    from kipcheck.impl.wire.codec import encode_response

    _, body = decode_response(SHARE_FETCH, exchange.api_version, frame)
    responses = tuple(dataclasses.replace(topic, partitions=tuple(rewrite(part) for part in topic.partitions))
                      for topic in body.responses)
    return encode_response(SHARE_FETCH, exchange.api_version, exchange.correlation_id,
                           dataclasses.replace(body, responses=responses))[4:]
