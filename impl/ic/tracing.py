"""IcTraces: the coordinator's own `ic` traces (shared/TRACE-FORMAT.md), one file per group and partition.

    traces = IcTraces(directory, config, storage=None)   # storage: impl/storage (default: a Storage of its own)
    traces.commit(key, at_ms, member, ranges, error, stable_offset, held, appends)
    traces.fetch(key, at_ms, member, stable_offset, held)
    traces.replay(key, at_ms, stable_offset, held)     # after a restart, for keys traced before

Files: `ic.<group>:<topic>:<partition>.jsonl` (the key percent-escaped), resumed
across restarts like the share-state traces, so the `replay` step after a crash
is judged against every commit traced before it (IC-12). `observed.ranges` is
written when the partition holds at most TRACE_RANGES_MAX ranges; above that it
is left out (not judged) and the `appends` carry the evidence. A replay step
always carries every range.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from kipcheck.impl.ic.config import IcConfig
from kipcheck.impl.ic.ranges import Range, RangeSet
from kipcheck.impl.storage import Storage
from kipcheck.impl.topic_partition import keyed
from kipcheck.impl.tracing import Trace, quoted_name

TRACE_RANGES_MAX = 10_000
Key = tuple[str, str, int]


class IcTraces:
    def __init__(self, directory: str | os.PathLike, config: IcConfig, storage: Storage | None = None) -> None:
        self.directory = Path(directory)
        self._storage = storage or Storage()
        self._storage.make_dirs(self.directory)
        self._header = {"machine": "ic", "config": config.trace_config()}
        self._traces: dict[Key, Trace] = {}

    def traced_keys(self) -> list[Key]:
        """Keys with an ic trace in the directory, from this process or an earlier one."""
        keys = []
        for path in self.directory.glob("ic.*.jsonl"):
            group, (topic, partition) = keyed(urllib.parse.unquote(path.name[3:-6]))
            keys.append((group, topic, partition))
        return sorted(keys)

    def traced(self, key: Key) -> bool:
        return key in self._traces or self._path(key).exists()

    def commit(self, key: Key, at_ms: int, member: str, ranges: list[Range], error: str, stable_offset: int,
               held: RangeSet, appends: list[dict]) -> None:
        observed = {"error": error, "stable_offset": stable_offset, **_ranges(held), "appends": appends}
        self._trace(key).step(at_ms, member, "commit", {"ranges": [list(pair) for pair in ranges]}, observed)

    def fetch(self, key: Key, at_ms: int, member: str, stable_offset: int, held: RangeSet) -> None:
        self._trace(key).step(at_ms, member, "fetch", {}, {"stable_offset": stable_offset, **_ranges(held)})

    def replay(self, key: Key, at_ms: int, stable_offset: int, held: RangeSet) -> None:
        self._trace(key).step(at_ms, "coordinator", "replay", {},
                              {"stable_offset": stable_offset, "ranges": [list(pair) for pair in held]})

    def paths(self) -> list[Path]:
        return sorted(self.directory.glob("ic.*.jsonl"))

    def close(self) -> None:
        for trace in self._traces.values():
            trace.close()
        self._traces.clear()

    def _trace(self, key: Key) -> Trace:
        trace = self._traces.get(key)
        if trace is None:
            trace = self._traces[key] = Trace(self._path(key), self._header, self._storage)
        return trace

    def _path(self, key: Key) -> Path:
        group, topic, partition = key
        return self.directory / f"ic.{quoted_name(f'{group}:{topic}:{partition}')}.jsonl"


def _ranges(held: RangeSet) -> dict:
    return {"ranges": [list(pair) for pair in held]} if len(held) <= TRACE_RANGES_MAX else {}
