"""Test-only helpers (imported by name: conftest.py puts tests/ on the path): a Disk that fails where a test
tells it to, the broker in-process on top of one, and v2 record batches built by kio.

Run as a script, this module is a `kipcheck broker` launcher whose disk kills
the process with SIGKILL in the middle of its N-th write to a path containing
PART (after a random part of it):
KIPCHECK_CRASH_AT_WRITE=N,SEED,PART python tests/harness.py broker ...

    disk = FaultyDisk()
    disk.fail("short_write")                  # the next write stores half its bytes and says so
    disk.fail("write", errno.ENOSPC, path="topics.json", times=None)   # every write to topics.json, until healed
    disk.fail("sync", errno.EIO)              # the next fsync
    disk.heal()                               # no more faults
    disk.fired                                # how many faults fired

Operations: open, write, short_write, sync, truncate, make_dirs, rename,
remove, sync_dir. A fault names a substring of the path it applies to ("" is
every path). The production code never sees this module: tests hand a
FaultyDisk to impl/storage.Storage, or to the broker through
Broker.storage_factory.
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import io
import os
import random
import signal
import sys
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_batch

from kipcheck.impl.broker.broker import Broker
from kipcheck.impl.broker.config import split_properties
from kipcheck.impl.storage import Disk, Storage


RECORD_TIME = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def record_batch(count: int, producer_id: int = -1, sequence: int = -1, epoch: int = -1) -> bytes:
    """A v2 record batch of `count` records ("v0", "v1", ...), as a producer sends it."""
    records = tuple(Record(attributes=0, timestamp=RECORD_TIME, offset=index, key=None, value=f"v{index}".encode(),
                           headers=()) for index in range(count))
    buffer = io.BytesIO()
    write_batch(buffer, NewRecordBatch(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                       records=records, attributes=0))
    return buffer.getvalue()


@dataclass
class Fault:
    operation: str
    error: int
    path: str
    times: int | None  # None: until healed


class FaultyDisk(Disk):
    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._paths: dict[int, str] = {}
        self._lock = threading.Lock()
        self.fired = 0

    def fail(self, operation: str, error: int = errno.ENOSPC, path: str = "", times: int | None = 1) -> None:
        with self._lock:
            self._faults.append(Fault(operation, error, path, times))

    def heal(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take(self, operations: tuple[str, ...], path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.operation in operations and fault.path in path:
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times == 0:
                            self._faults.remove(fault)
                    self.fired += 1
                    return fault
        return None

    def _check(self, operation: str, path) -> None:
        fault = self._take((operation,), str(path))
        if fault is not None:
            raise OSError(fault.error, f"injected: {os.strerror(fault.error)}")

    def open(self, path: Path, create: bool) -> int:
        self._check("open", path)
        descriptor = super().open(path, create)
        self._paths[descriptor] = str(path)
        return descriptor

    def write(self, descriptor: int, data, position: int) -> int:
        fault = self._take(("write", "short_write"), self._paths.get(descriptor, ""))
        if fault is None:
            return super().write(descriptor, data, position)
        if fault.operation == "short_write":
            return super().write(descriptor, data[:max(1, len(data) // 2)], position)
        raise OSError(fault.error, f"injected: {os.strerror(fault.error)}")

    def sync(self, descriptor: int) -> None:
        self._check("sync", self._paths.get(descriptor, ""))
        super().sync(descriptor)

    def truncate(self, descriptor: int, size: int) -> None:
        self._check("truncate", self._paths.get(descriptor, ""))
        super().truncate(descriptor, size)

    def close(self, descriptor: int) -> None:
        self._paths.pop(descriptor, None)
        super().close(descriptor)

    def make_dirs(self, path: Path) -> None:
        self._check("make_dirs", path)
        super().make_dirs(path)

    def rename(self, source: Path, target: Path) -> None:
        self._check("rename", target)
        super().rename(source, target)

    def remove(self, path: Path) -> None:
        self._check("remove", path)
        super().remove(path)

    def sync_dir(self, path: Path) -> None:
        self._check("sync_dir", path)
        super().sync_dir(path)


class CrashingDisk(Disk):
    """Kills its own process with SIGKILL in the middle of its `crash_at`-th write to a path containing
    `path_part`, after a random part of it."""

    def __init__(self, crash_at: int, seed: int, path_part: str = ""):
        self.crash_at, self.path_part, self.writes, self.random = crash_at, path_part, 0, random.Random(seed)
        self._paths: dict[int, str] = {}

    def open(self, path: Path, create: bool) -> int:
        descriptor = super().open(path, create)
        self._paths[descriptor] = str(path)
        return descriptor

    def write(self, descriptor: int, data, position: int) -> int:
        self.writes += self.path_part in self._paths.get(descriptor, "")
        if self.writes == self.crash_at:
            part = self.random.randrange(len(data) + 1)   # from nothing to all of it, never answered
            if part:
                super().write(descriptor, data[:part], position)
            print(f"crash in write {self.writes}: {part} of {len(data)} bytes to {self._paths.get(descriptor)}",
                  file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().write(descriptor, data, position)


class InProcessBroker:
    """The reference broker on a thread of this process, writing through `disk`.

        with InProcessBroker(tmp_path, disk, {"share.auto.offset.reset": "earliest"}) as broker:
            broker.bootstrap, broker.port, broker.broker (the Broker), broker.trace_dir
    """

    def __init__(self, work_dir: Path, disk: Disk, settings: dict[str, str] | None = None,
                 profile: str = "kafka-4.2"):
        config, share_config = split_properties(settings or {}, profile)
        self.trace_dir = Path(work_dir) / "traces"
        broker_class = type("FaultyDiskBroker", (Broker,), {"storage_factory": staticmethod(partial(Storage, disk))})
        self.loop = asyncio.new_event_loop()
        self.broker = None
        self._make = lambda: broker_class(Path(work_dir) / "data", config, share_config, self.trace_dir)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "InProcessBroker":
        self._thread.start()
        self.broker = self.call(self._make)
        _, self.port = asyncio.run_coroutine_threadsafe(self.broker.start("127.0.0.1", 0), self.loop).result(30)
        return self

    def call(self, function):
        """Run `function()` on the broker's loop (its state is the loop's alone) and return its result."""
        async def run():
            return function()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


if __name__ == "__main__":
    crash_at, seed, path_part = (os.environ["KIPCHECK_CRASH_AT_WRITE"].split(",", 2) + ["0", ""])[:3]
    Broker.storage_factory = staticmethod(partial(Storage, CrashingDisk(int(crash_at), int(seed), path_part)))
    from kipcheck.cli import main

    raise SystemExit(main(sys.argv[1:]))
