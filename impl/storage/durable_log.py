"""DurableLog: an append-only file of length-prefixed, CRC-32C-checked records (the share-state log).

    log = DurableLog(path, fsync=True, storage=None)   # scans the file (created by the first append)
    for payload in log.replay(): ...       # every intact record, in order
    log.truncated_bytes                    # bytes of torn tail dropped at open (0 if clean)
    log.append(payload)                    # one record: written, fsynced, then returns
    log.append_many([payload, ...])        # several records, one fsync
    log.truncate(log.size_bytes() taken earlier)   # undo appends (a failed companion write)
    log.rewrite([payload, ...])            # replace the whole file atomically (compaction)
    log.close()

On disk: an 8-byte magic, then records `length:u32be crc32c:u32be payload`.
At open the file is scanned; the first record that is short (torn write) or
whose CRC does not match ends the log, and the file is cut there, so a crash
mid-write is never misread and the next append starts on a clean boundary.

Durability: with fsync=True (the default) `append` returns only after fsync,
so a record whose append returned survives kill -9 and power loss; fsync=False
is for tests that need speed, not safety. Every write goes through
storage.Storage: an append that fails raises StorageError and leaves the file
as it was (cut back), and the log takes appends again as soon as the disk
does. `rewrite` writes a temporary file, fsyncs it, renames it over the log
and fsyncs the directory; if it fails the old log stays.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable, Iterator

from crc32c import crc32c

from kipcheck.impl.storage.files import Storage

MAGIC = b"KIPSLOG1"
_HEADER = struct.Struct(">II")
MAX_RECORD_BYTES = 64 * 1024 * 1024   # a length beyond this is corruption, not a record


def frame(payload: bytes) -> bytes:
    """One record as stored: length, CRC-32C of the payload, payload."""
    return _HEADER.pack(len(payload), crc32c(payload)) + payload


class DurableLog:
    def __init__(self, path: str | os.PathLike, fsync: bool = True, storage: Storage | None = None) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._storage = storage or Storage()
        self._payloads, good_end, size = _scan(self.path)
        self.truncated_bytes = size - good_end
        exists = self.path.exists()
        self._file = self._storage.append_file(self.path, good_end if exists else None, size if exists else None)

    def replay(self) -> Iterator[bytes]:
        """The intact records found at open, in order (each given once; the list is then dropped)."""
        payloads, self._payloads = self._payloads, []
        yield from payloads

    def append(self, payload: bytes) -> None:
        self._write(frame(payload))

    def append_many(self, payloads: Iterable[bytes]) -> None:
        self._write(b"".join(frame(payload) for payload in payloads))

    def _write(self, data: bytes) -> None:
        """Write and sync (StorageError: nothing written); an empty file gets the magic first."""
        self._file.append(data if self._file.size else MAGIC + data, sync=self.fsync)

    def size_bytes(self) -> int:
        return self._file.size

    def truncate(self, size_bytes: int) -> None:
        """Cut the log back to `size_bytes`, a size_bytes() taken earlier, and sync.

        Undoes appends whose companion write to another log failed (the IC coordinator writes
        the primary offsets log, then the IC log). Raises StorageError if the file cannot be cut.
        """
        self._file.truncate(size_bytes)

    def rewrite(self, payloads: Iterable[bytes]) -> None:
        """Atomically replace the log's content with `payloads` (used to compact it)."""
        data = MAGIC + b"".join(frame(payload) for payload in payloads)
        self._storage.replace(self.path, data)
        self._file = self._storage.append_file(self.path, len(data))

    def close(self) -> None:
        self._file.close()


def _scan(path: Path) -> tuple[list[bytes], int, int]:
    """(intact payloads, offset just past the last intact record, file size)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0, 0
    if not data:
        return [], 0, 0
    if data[:len(MAGIC)] != MAGIC:
        if MAGIC.startswith(data):
            return [], 0, len(data)          # torn while writing the magic itself
        raise ValueError(f"{path} is not a share-state log (bad magic)")
    payloads, position = [], len(MAGIC)
    while position + _HEADER.size <= len(data):
        length, checksum = _HEADER.unpack_from(data, position)
        start, end = position + _HEADER.size, position + _HEADER.size + length
        if length > MAX_RECORD_BYTES or end > len(data):
            break
        payload = data[start:end]
        if crc32c(payload) != checksum:
            break
        payloads.append(payload)
        position = end
    return payloads, position, len(data)
