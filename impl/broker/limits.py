"""The server's bounds on what clients can make it hold: frame bytes, connections, time a fetch waits.

FramePool counts the bytes of request frames being read or handled, against a
capacity: Kafka's `queued.max.request.bytes` broker-wide, and one pool per
connection (`queued.max.request.bytes.per.connection`). A reader reserves a
frame's size before reading its body and waits, reading nothing more (Kafka
mutes the channel), until it fits; waiters are served in arrival order, so a
large frame is not starved by small ones. A frame always fits an empty pool,
so any frame up to `socket.request.max.bytes` is eventually read.

ConnectionSlots keeps `max.connections` (the acceptor waits for a free slot,
as Kafka's does) and `max.connections.per.ip` (a connection beyond it is
closed at once, as Kafka drops it).

`reserve_file_descriptors` checks at start that the process may open a file
descriptor for every connection the limits allow, plus the files its storage
keeps open at most (segments, traces, state logs: impl/storage opens them on
demand, a bounded set) and its own, and raises the soft RLIMIT_NOFILE to that
(as the JVM raises Kafka's), so a client cannot make the broker run out of
them: it is refused by a limit first.
"""

from __future__ import annotations

import asyncio
import resource
from collections import Counter, deque

MAX_WAIT_MS = 30_000  # a fetch long-polls at most this long, whatever max_wait it asks for
# The listening socket, the standard streams, the event loop's own, files opened outside the storage.
FILES_RESERVED = 64


class FramePool:
    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self._waiters: deque[tuple[int, asyncio.Future]] = deque()

    async def reserve(self, size: int) -> None:
        """Wait until `size` more bytes fit (or the pool is empty), then hold them."""
        if not self._waiters and self._fits(size):
            self.used_bytes += size
            return
        granted = asyncio.get_running_loop().create_future()
        self._waiters.append((size, granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release(size)  # granted just as the reader was cancelled
            else:
                self._waiters.remove((size, granted))
                self._grant()
            raise

    def release(self, size: int) -> None:
        self.used_bytes -= size
        self._grant()

    @property
    def waiting(self) -> bool:
        """Whether a reader waits for room."""
        return bool(self._waiters)

    def _fits(self, size: int) -> bool:
        return self.used_bytes == 0 or self.used_bytes + size <= self.capacity_bytes

    def _grant(self) -> None:
        while self._waiters and self._fits(self._waiters[0][0]):
            size, granted = self._waiters.popleft()
            self.used_bytes += size
            granted.set_result(None)


class ConnectionSlots:
    def __init__(self, max_connections: int, max_connections_per_ip: int):
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.open_by_ip: Counter[str] = Counter()
        self._freed = asyncio.Event()

    @property
    def open_connections(self) -> int:
        return sum(self.open_by_ip.values())

    async def wait_for_slot(self) -> None:
        while self.open_connections >= self.max_connections:
            self._freed.clear()
            await self._freed.wait()

    def admit(self, ip: str) -> bool:
        """Count a new connection from `ip`; False (not counted) if `ip` has max.connections.per.ip open."""
        if self.open_by_ip[ip] >= self.max_connections_per_ip:
            return False
        self.open_by_ip[ip] += 1
        return True

    def release(self, ip: str) -> None:
        self.open_by_ip[ip] -= 1
        if not self.open_by_ip[ip]:
            del self.open_by_ip[ip]
        self._freed.set()


def reserve_file_descriptors(max_connections: int, open_files_max: int) -> int:
    """The descriptors the limits need (one per connection, the storage's open files, FILES_RESERVED);
    raises the soft limit to it, or OSError if the hard limit is lower."""
    needed = max_connections + open_files_max + FILES_RESERVED
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and needed > hard:
        raise OSError(f"max.connections ({max_connections}) + {open_files_max + FILES_RESERVED} files of its own "
                      f"need {needed} file descriptors, but this "
                      f"process may open at most {hard} (ulimit -Hn): lower them or raise the limit")
    if soft != resource.RLIM_INFINITY and needed > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return needed
