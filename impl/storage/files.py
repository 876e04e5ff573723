"""Storage: files written only at their end, whole files replaced atomically, a bounded set of open files.

    storage = Storage(disk=SYSTEM_DISK, open_files_max=OPEN_FILES_MAX)
    file = storage.append_file(path)                  # a new file: created by its first append
    file = storage.append_file(path, size, found_size)   # an existing one: `size` good bytes of `found_size`
    position = file.append(data, sync=False)          # StorageError: the file is as it was
    file.sync(); file.read(position, length); file.size
    storage.replace(path, data)                       # atomic: temporary file, fsync, rename, fsync dir
    storage.make_dirs(path); storage.rename(source, target); storage.remove(path); storage.forget(path)
    storage.close()

The rule every writer keeps through this module: a file's `size` is the end
its owner has accepted, and nothing past it is ever acknowledged. An append
that fails (a short write, ENOSPC, EIO on fsync) is cut back to `size` before
StorageError is raised, so the files are as they were; if even the cut fails,
the file takes no more appends until a later append manages the cut first
(nothing stays broken once the disk can be written again). Bytes found past
`size` when a file is opened (a torn write from a crash) are cut the same way.

Descriptors: at most `open_files_max` files are open at once; the least
recently used is closed when another must open, and reopened on demand. A
closed descriptor loses nothing: written bytes are in the operating system,
and `sync` reopens the file to fsync it. (An AppendFile reuses its descriptor
without a lookup while the storage has closed none; recency is only kept
exact once files churn, which is when it matters.)

A new file's directory is fsynced once the file is created, so the file
survives a power loss once its content is fsynced. `replace` is durable when
it returns; if only the final directory fsync fails, the new content is in
place (visible, surviving kill -9) and the failure is logged.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from pathlib import Path

from kipcheck.impl.storage.disk import SYSTEM_DISK, Disk, StorageError, write_all

OPEN_FILES_MAX = 512

log = logging.getLogger("kipcheck.storage")


class Storage:
    def __init__(self, disk: Disk = SYSTEM_DISK, open_files_max: int = OPEN_FILES_MAX):
        self._open: OrderedDict[Path, int] = OrderedDict()
        if open_files_max < 1:
            raise ValueError(f"open_files_max must be >= 1, found {open_files_max}")
        self.disk = disk
        self.open_files_max = open_files_max
        self.closes = 0   # descriptors closed so far: a descriptor taken when this was n is open while it is n

    def append_file(self, path: Path, size: int | None = None, found_size: int | None = None) -> "AppendFile":
        """The file at `path` whose first `size` bytes are good (None: it does not exist yet)."""
        return AppendFile(self, Path(path), size, found_size)

    def open_count(self) -> int:
        return len(self._open)

    def descriptor(self, path: Path, create: bool = False) -> int:
        """An open descriptor for `path` (opened on demand; `create` makes it new and empty)."""
        descriptor = self._open.get(path)
        if descriptor is not None and not create:
            self._open.move_to_end(path)
            return descriptor
        self.forget(path)
        while len(self._open) >= self.open_files_max:
            _, oldest = self._open.popitem(last=False)
            self._close(oldest)
        descriptor = self.disk.open(path, create)
        self._open[path] = descriptor
        return descriptor

    def forget(self, path: Path) -> None:
        """Close `path`'s descriptor if it is open (it reopens on demand)."""
        descriptor = self._open.pop(path, None)
        if descriptor is not None:
            self._close(descriptor)

    def replace(self, path: Path, data: bytes) -> None:
        """Make `data` the whole content of `path` atomically; StorageError leaves `path` as it was."""
        temporary = path.with_name(path.name + ".tmp")
        try:
            self.disk.make_dirs(path.parent)
            descriptor = self.disk.open(temporary, create=True)
            try:
                write_all(self.disk, descriptor, data, 0)
                self.disk.sync(descriptor)
            finally:
                self._close(descriptor)
            self.forget(path)
            self.disk.rename(temporary, path)
        except OSError as error:
            self._remove_quietly(temporary)
            raise StorageError(path, "replace", error) from error
        try:
            self.disk.sync_dir(path.parent)
        except OSError as error:
            log.warning("%s replaced, but fsync of its directory failed (%s): it may not survive a power loss",
                        path, error)

    def make_dirs(self, path: Path) -> None:
        try:
            self.disk.make_dirs(path)
        except OSError as error:
            raise StorageError(path, "mkdir", error) from error

    def rename(self, source: Path, target: Path) -> None:
        self.forget(source)
        self.forget(target)
        try:
            self.disk.rename(source, target)
        except OSError as error:
            raise StorageError(source, "rename", error) from error

    def remove(self, path: Path) -> None:
        self.forget(path)
        try:
            self.disk.remove(path)
        except OSError as error:
            raise StorageError(path, "remove", error) from error

    def close(self) -> None:
        while self._open:
            self._close(self._open.popitem()[1])

    def __del__(self) -> None:
        # The descriptors are plain integers, which nothing else closes: a storage dropped without close (a
        # coordinator abandoned as after a crash, in a test) must not keep them for the life of the process.
        self.close()

    def _close(self, descriptor: int) -> None:
        self.closes += 1
        try:
            self.disk.close(descriptor)
        except OSError:
            pass  # Linux releases the descriptor whatever close answers; the data is the kernel's already

    def _remove_quietly(self, path: Path) -> None:
        try:
            self.disk.remove(path)
        except OSError:
            pass  # a leftover temporary file is never read: the next replace overwrites it


class AppendFile:
    """One file written only at its end; see the module docstring for the rule it keeps."""

    def __init__(self, storage: Storage, path: Path, size: int | None, found_size: int | None):
        self.storage, self.path = storage, path
        self._descriptor_while = (-1, -1)   # (descriptor, storage.closes when it was taken)
        self.exists = size is not None
        self.size = size or 0
        # A file found on disk may hold bytes an earlier process wrote and never fsynced.
        self.unsynced = found_size is not None
        self._overhang = found_size is not None and found_size > self.size
        if self._overhang:
            try:
                self._cut()
            except StorageError as error:
                log.warning("%s; the next append tries again", error)

    def append(self, data: bytes, sync: bool = False) -> int:
        """Write `data` at the end (and fsync it when `sync`); returns where it starts."""
        if self._overhang:
            self._cut()
        position = self.size
        try:
            descriptor = self._descriptor()
            write_all(self.storage.disk, descriptor, data, position)
            if sync:
                self.storage.disk.sync(descriptor)
        except OSError as error:
            self._overhang = self.exists
            if self._overhang:
                try:
                    self._cut()
                except StorageError:
                    pass  # _overhang stays set: no append lands past a torn one
            raise StorageError(self.path, "write", error) from error
        self.size += len(data)
        self.unsynced = not sync
        return position

    def sync(self) -> None:
        if not self.unsynced:
            return
        try:
            self.storage.disk.sync(self._descriptor())
        except OSError as error:
            raise StorageError(self.path, "fsync", error) from error
        self.unsynced = False

    def truncate(self, size: int) -> None:
        """Cut the file back to an earlier `size` and fsync it (undoing appends that a failed companion
        write made moot); StorageError leaves the cut pending, done before the next append."""
        if not 0 <= size <= self.size:
            raise ValueError(f"{self.path}: cannot cut back to {size} bytes of {self.size}")
        self.size, self._overhang, self.unsynced = size, self.exists, True
        if self._overhang:
            self._cut()
        self.sync()

    def read(self, position: int, length: int) -> bytes:
        return os.pread(self._descriptor(), length, position)

    def close(self) -> None:
        self.storage.forget(self.path)

    def _descriptor(self) -> int:
        """The file's descriptor: the one taken last while the storage has closed none since (no lookup,
        the common case), else from the storage, which opens it (creating a new file) if need be."""
        descriptor, closes = self._descriptor_while
        if closes == self.storage.closes:
            return descriptor
        if self.exists:
            descriptor = self.storage.descriptor(self.path)
        else:
            self.storage.disk.make_dirs(self.path.parent)
            descriptor = self.storage.descriptor(self.path, create=True)
            self.exists = True
            self.storage.disk.sync_dir(self.path.parent)
        self._descriptor_while = (descriptor, self.storage.closes)
        return descriptor

    def _cut(self) -> None:
        """Cut the file back to `size` (undoing a failed or torn write)."""
        try:
            self.storage.disk.truncate(self._descriptor(), self.size)
        except OSError as error:
            raise StorageError(self.path, "undo of a failed write", error) from error
        self._overhang = False
