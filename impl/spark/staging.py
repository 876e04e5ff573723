"""The share connector's staging store: each micro-batch's records, on disk, so Spark can replay them.

A share group is not replayable: a record handed out once is not handed out
again unless it is released. The stream reader therefore writes the records
one poll acquired, before it names the batch to Spark, as one Arrow IPC file
`batch-<n>.arrow` in the staging location; Spark's tasks read their slices
from it, and a failed or retried task, or the re-run of the batch after a
driver crash, reads the same rows again.

A file is written to a temporary name, fsynced, renamed and its directory
fsynced, so after a kill -9 a batch file is either whole or absent. The
location must be a path the driver and every executor see (local mode, or a
shared file system), like the checkpoint location it should sit beside.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

import pyarrow as pa

_BATCH_FILE = re.compile(r"batch-(\d+)\.arrow")


class StagedBatchMissing(RuntimeError):
    """A batch Spark planned is not in the staging location (deleted or never written): its records are lost."""


class StagingStore:
    def __init__(self, location: str | os.PathLike) -> None:
        self.location = Path(location)

    def path(self, batch: int) -> Path:
        return self.location / f"batch-{batch}.arrow"

    def stage(self, batch: int, records: pa.RecordBatch) -> None:
        """Write batch `batch` durably (whole or not at all)."""
        self.location.mkdir(parents=True, exist_ok=True)
        temporary = self.location / f".batch-{batch}.arrow.tmp"
        with open(temporary, "wb") as file:
            with pa.ipc.new_file(file, records.schema) as writer:
                writer.write_batch(records)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path(batch))
        directory = os.open(self.location, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def rows(self, batch: int) -> int:
        reader = self._open(batch)
        return sum(reader.get_batch(index).num_rows for index in range(reader.num_record_batches))

    def read(self, batch: int, first_row: int, rows: int, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """Rows [first_row, first_row + rows) of a staged batch, as record batches of `schema`."""
        table = self._open(batch).read_all()
        if table.schema != schema:
            raise ValueError(f"staged batch {batch} in {self.location} has columns {table.schema.names}, the query "
                             f"reads {schema.names}: a staging location belongs to one query")
        yield from table.slice(first_row, rows).to_batches()

    def batches(self) -> list[int]:
        if not self.location.is_dir():
            return []
        return sorted(int(match.group(1)) for name in os.listdir(self.location)
                      if (match := _BATCH_FILE.fullmatch(name)))

    def discard(self, keep_from: int, keep_below: int) -> None:
        """Delete staged batches outside [keep_from, keep_below), and unfinished temporary files."""
        for batch in self.batches():
            if not keep_from <= batch < keep_below:
                self.path(batch).unlink(missing_ok=True)
        for leftover in self.location.glob(".batch-*.arrow.tmp"):
            leftover.unlink(missing_ok=True)

    def _open(self, batch: int) -> pa.ipc.RecordBatchFileReader:
        try:
            return pa.ipc.open_file(pa.memory_map(str(self.path(batch))))
        except FileNotFoundError:
            raise StagedBatchMissing(f"micro-batch {batch} is not in the staging location {self.location}: "
                                     f"its records cannot be replayed") from None
