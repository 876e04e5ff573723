"""BufferedReader: what a processor's PartitionReader over a Kafka consumer does, whichever consumer it is.

    class MyReader(BufferedReader):
        def _move(self, partition, offset): ...      # the consumer reads `partition` from `offset` next
        def _fetch(self): ...                         # what the consumer has now: [(partition, Record), ...]
        def _pause(self, partition): ...; def _resume(self, partition): ...

The processor says what to read from where (it starts every partition at
offset 0 and reads in offset order, spec/expansion.md EX-7). A partition is
moved to the offset first asked for, and again when asked for another; what
one fetch returns is kept per partition, and a partition holding
`buffer_max` records is paused until the processor takes them, so the memory
held is bounded. Records fetched before a partition was moved back are
dropped; a gap above is the processor's to refuse. impl/expansion/confluent.py
and impl/job/reader.py are the two readers built on it.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

from kipcheck.impl.expansion.processor import Record

BUFFER_MAX = 2_000  # records held per partition before it is paused


class BufferedReader:
    def __init__(self, buffer_max: int = BUFFER_MAX) -> None:
        if buffer_max < 1:
            raise ValueError(f"buffer_max must be >= 1, found {buffer_max}")
        self.buffer_max = buffer_max
        self._buffers: dict[int, deque[Record]] = {}
        self._next: dict[int, int] = {}  # partition -> the offset the consumer returns next for it
        self._paused: set[int] = set()

    def read(self, partition: int, offset: int, max_records: int) -> list[Record]:
        buffer = self._buffers.get(partition)
        expected = buffer[0].offset if buffer else self._next.get(partition)
        if expected != offset:
            self._move(partition, offset)
            self._paused.discard(partition)
            self._buffers[partition] = deque()
            self._next[partition] = offset
        if not self._buffers[partition]:
            self._keep(self._fetch())
        buffer = self._buffers[partition]
        records = [buffer.popleft() for _ in range(min(max_records, len(buffer)))]
        if partition in self._paused and len(buffer) < self.buffer_max:
            self._resume(partition)
            self._paused.discard(partition)
        return records

    def _keep(self, fetched: Iterable[tuple[int, Record]]) -> None:
        for partition, record in fetched:
            if partition not in self._next or record.offset < self._next[partition]:
                continue  # fetched before the partition was moved back
            self._buffers[partition].append(record)
            self._next[partition] = record.offset + 1
            if len(self._buffers[partition]) >= self.buffer_max and partition not in self._paused:
                self._pause(partition)
                self._paused.add(partition)

    def _move(self, partition: int, offset: int) -> None:
        raise NotImplementedError

    def _fetch(self) -> Iterable[tuple[int, Record]]:
        raise NotImplementedError

    def _pause(self, partition: int) -> None:
        raise NotImplementedError

    def _resume(self, partition: int) -> None:
        raise NotImplementedError
