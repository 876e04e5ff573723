"""The broker's write boundary: every byte it writes to disk goes through this package.

- disk.Disk: the system calls that change files (SYSTEM_DISK in production; a
  test passes a subclass that injects short writes, ENOSPC, EIO);
- files.Storage: files written only at their end (AppendFile), whole files
  replaced atomically, and at most OPEN_FILES_MAX descriptors open at once;
- durable_log.DurableLog: the share-state log (length + CRC-32C records).

A write that fails raises StorageError (Kafka's KAFKA_STORAGE_ERROR) and
leaves the file as it was; see files.py for the rule and its limits.
"""

from kipcheck.impl.storage.disk import SYSTEM_DISK, Disk, StorageError
from kipcheck.impl.storage.files import OPEN_FILES_MAX, AppendFile, Storage

__all__ = ["SYSTEM_DISK", "Disk", "StorageError", "OPEN_FILES_MAX", "AppendFile", "Storage"]
