"""Expansion traces (TRACE-FORMAT.md `expansion`, its extensions in spec/expansion.md), judged by `kipcheck check`.

    trace = ExpansionTrace.open(directory, "processor-3", initial=10)   # expansion.processor-3.jsonl (or .2, .3 ...)
    trace = ExpansionTrace.open(directory, "group", initial=10, view="group")   # the group's view: no reads
    trace.expand_partitions(count, splits); trace.expand_processors(count)
    trace.append(partition, key_hash, offset); trace.route(key_hash, partition)
    trace.assign(processor, partition, offset); trace.release(processor, partition, offset)
    trace.commit(partition, offset, processor=None); trace.ready(processor)
    trace.read(use, processor, partition, offset, key_hash)        # use: process, rebuild or skip

One file per writer: a producer, each processor (its own view), the group.
Steps are numbered and timed (`clock_ms`, wall-clock milliseconds unless
given) in the order they are written; writers on several threads are
serialised. A process that starts again writes a new file.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Iterable

from kipcheck.impl.storage import Storage
from kipcheck.impl.tracing import Trace, open_new_trace, safe_name
from kipcheck.model.expansion import CATCH_UP_LAG_MAX, PROCESSORS


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ExpansionTrace:
    def __init__(self, trace: Trace, actor: str, clock_ms: Callable[[], int] = _wall_clock_ms) -> None:
        self._trace, self.actor, self._clock_ms = trace, actor, clock_ms
        self._lock = threading.Lock()
        self.path = trace.path

    @classmethod
    def open(cls, directory: str | Path, actor: str, initial: int, catch_up_lag_max: int = CATCH_UP_LAG_MAX,
             view: str = PROCESSORS, clock_ms: Callable[[], int] = _wall_clock_ms,
             storage: Storage | None = None) -> "ExpansionTrace":
        """A new trace `expansion.<actor>.jsonl` in `directory`, or the next incarnation `...<actor>.<n>.jsonl`."""
        config = {"initial_partitions": initial, "initial_processors": initial, "catch_up_lag_max": catch_up_lag_max,
                  "view": view}
        trace = open_new_trace(directory, f"expansion.{safe_name(actor)}", {"machine": "expansion", "config": config},
                               storage)
        return cls(trace, actor, clock_ms)

    def _step(self, op: str, args: dict, observed: dict | None = None) -> None:
        with self._lock:
            self._trace.step(self._clock_ms(), self.actor, op, args, observed)

    def expand_partitions(self, count: int, splits: Iterable[tuple[int, int, int]]) -> None:
        self._step("expand_partitions", {"count": count}, {"splits": [
            {"partition": partition, "source": origin, "offset": offset} for partition, origin, offset in splits]})

    def expand_processors(self, count: int) -> None:
        self._step("expand_processors", {"count": count})

    def route(self, key_hash: int, partition: int) -> None:
        self._step("route", {"key_hash": key_hash}, {"partition": partition})

    def append(self, partition: int, key_hash: int, offset: int) -> None:
        self._step("append", {"partition": partition, "key_hash": key_hash}, {"offset": offset})

    def assign(self, processor: int, partition: int, offset: int) -> None:
        self._step("assign", {"processor": processor, "partition": partition, "offset": offset})

    def release(self, processor: int, partition: int, offset: int) -> None:
        self._step("release", {"processor": processor, "partition": partition, "offset": offset})

    def commit(self, partition: int, offset: int, processor: int | None = None) -> None:
        args = {"partition": partition, "offset": offset}
        self._step("commit", args if processor is None else {**args, "processor": processor})

    def ready(self, processor: int) -> None:
        self._step("ready", {"processor": processor})

    def read(self, use: str, processor: int, partition: int, offset: int, key_hash: int) -> None:
        self._step(use, {"processor": processor, "partition": partition, "offset": offset, "key_hash": key_hash})

    def close(self) -> None:
        with self._lock:
            self._trace.close()
