"""DurableLog: an append-only file of length-prefixed, CRC-32C-checked records.

    log = DurableLog(path, fsync=True)     # opens (creating) and scans the file
    for payload in log.replay(): ...       # every intact record, in order
    log.truncated_bytes                    # bytes of torn tail dropped at open (0 if clean)
    log.append(payload)                    # one record: written, flushed, fsynced, then returns
    log.append_many([payload, ...])        # several records, one fsync
    log.rewrite([payload, ...])            # replace the whole file atomically (compaction)
    log.close()

On disk: an 8-byte magic, then records `length:u32be crc32c:u32be payload`.
At open the file is scanned; the first record that is short (torn write) or
whose CRC does not match ends the log, and the file is truncated there (and
fsynced), so a crash mid-write is never misread and the next append starts on
a clean boundary. Durability: with fsync=True (the default) `append` returns
only after os.fsync, so a record whose append returned survives kill -9 and
power loss; fsync=False is for tests that need speed, not safety. `rewrite`
writes a temporary file, fsyncs it, renames it over the log and fsyncs the
directory.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable, Iterator

from crc32c import crc32c

MAGIC = b"KIPSLOG1"
_HEADER = struct.Struct(">II")
MAX_RECORD_BYTES = 64 * 1024 * 1024   # a length beyond this is corruption, not a record


def frame(payload: bytes) -> bytes:
    """One record as stored: length, CRC-32C of the payload, payload."""
    return _HEADER.pack(len(payload), crc32c(payload)) + payload


class DurableLog:
    def __init__(self, path: str | os.PathLike, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._broken = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._payloads, good_end, size = _scan(self.path)
        self.truncated_bytes = size - good_end
        self._file = open(self.path, "r+b" if size else "w+b")
        if good_end == 0:                      # new file, or torn inside the magic
            self._file.truncate(0)
            self._file.write(MAGIC)
            good_end = len(MAGIC)
            self._sync()
        elif self.truncated_bytes > 0:
            self._file.truncate(good_end)
            self._sync()
        self._file.seek(good_end)

    def replay(self) -> Iterator[bytes]:
        """The intact records found at open, in order (each given once; the list is then dropped)."""
        payloads, self._payloads = self._payloads, []
        yield from payloads

    def append(self, payload: bytes) -> None:
        self._write(frame(payload))

    def append_many(self, payloads: Iterable[bytes]) -> None:
        self._write(b"".join(frame(payload) for payload in payloads))

    def _write(self, data: bytes) -> None:
        """Write and sync; on failure cut the file back so no later record lands after a torn one."""
        if self._broken:
            raise OSError(f"{self.path}: an earlier write failed and could not be undone")
        position = self._file.tell()
        try:
            self._file.write(data)
            self._sync()
        except OSError:
            try:
                self._file.seek(position)
                self._file.truncate(position)
                self._sync()
            except OSError:
                self._broken = True
            raise

    def size_bytes(self) -> int:
        return self._file.tell()

    def truncate(self, size_bytes: int) -> None:
        """Cut the log back to `size_bytes`, a size_bytes() taken earlier, and sync.

        Undoes appends whose companion write to another log failed (the IC coordinator writes
        the primary offsets log, then the IC log). Raises OSError if the file cannot be cut.
        """
        if not len(MAGIC) <= size_bytes <= self.size_bytes():
            raise ValueError(f"{self.path}: cannot truncate to {size_bytes} bytes of {self.size_bytes()}")
        self._file.seek(size_bytes)
        self._file.truncate(size_bytes)
        self._sync()

    def rewrite(self, payloads: Iterable[bytes]) -> None:
        """Atomically replace the log's content with `payloads` (used to compact it)."""
        temporary = self.path.with_suffix(self.path.suffix + ".tmp")
        with open(temporary, "wb") as out:
            out.write(MAGIC + b"".join(frame(payload) for payload in payloads))
            out.flush()
            os.fsync(out.fileno())
        self._file.close()
        os.replace(temporary, self.path)
        _fsync_directory(self.path.parent)
        self._file = open(self.path, "r+b")
        self._file.seek(0, os.SEEK_END)

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()

    def _sync(self) -> None:
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())


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


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
