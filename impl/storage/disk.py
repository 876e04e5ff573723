"""Disk: the system calls that change files, the one place a write can fail.

Every write the broker makes goes through one Disk. Production uses
SYSTEM_DISK, which calls the operating system directly; a test passes a
subclass that fails where it is told to (short writes, ENOSPC, EIO on fsync,
a truncation that cannot undo). Nothing on the production path ever checks
whether faults are wanted.

`write` returns what pwrite returns, which may be short: callers use
`write_all` (files.py), never assume a whole write.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class StorageError(OSError):
    """A write, fsync or undo that did not reach the disk (Kafka's KAFKA_STORAGE_ERROR)."""

    def __init__(self, path: Path, action: str, cause: OSError):
        super().__init__(f"{path}: {action} failed: {cause.strerror or cause}")
        self.path, self.action, self.cause = path, action, cause


class Disk:
    def open(self, path: Path, create: bool) -> int:
        """A read-write descriptor; `create` makes the file (empty, even if a stale one was there)."""
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        return os.open(path, flags, 0o644)

    def write(self, descriptor: int, data: bytes | memoryview, position: int) -> int:
        return os.pwrite(descriptor, data, position)

    def sync(self, descriptor: int) -> None:
        os.fsync(descriptor)

    def truncate(self, descriptor: int, size: int) -> None:
        os.ftruncate(descriptor, size)

    def close(self, descriptor: int) -> None:
        os.close(descriptor)

    def make_dirs(self, path: Path) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def remove(self, path: Path) -> None:
        os.unlink(path)

    def sync_dir(self, path: Path) -> None:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


SYSTEM_DISK = Disk()


def write_all(disk: Disk, descriptor: int, data: bytes, position: int) -> None:
    """Write every byte of `data` at `position`; a short count continues, no progress is ENOSPC."""
    count = written = disk.write(descriptor, data, position)   # almost always all of it
    while written < len(data):
        if count <= 0:
            raise OSError(errno.ENOSPC, "the disk accepted no more bytes")
        count = disk.write(descriptor, memoryview(data)[written:], position + written)
        written += count
