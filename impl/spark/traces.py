"""What the connectors' Kafka clients saw, as kipcheck traces (TRACE-FORMAT.md), for `kipcheck check`.

- kipcheck-share: one `share-partition` trace per (group, topic, partition),
  `share-partition.<group:topic:partition>.jsonl`, written by the query's one
  share consumer: `acquire` (one poll's records of the partition, at the
  time the poll started), `acknowledge` (one commit of acknowledgements,
  with the error the client got), `leave` (the consumer closed, or, on a
  restart, its previous incarnation died with its process). The client does
  not see the producers, so before an acquire that reaches past the log end
  it knows, the trace appends (actor "log") the records up to the highest
  offset acquired. The first acquisition of a new trace sets `start_offset`.
- kipcheck-keyrange: one `ic` trace per (group, topic, partition),
  `ic.<group:topic:partition>.jsonl`: `commit` of the offsets a finished
  micro-batch adds (one individual commit, with the error the client got)
  and `fetch` of the stable offset read back.

Such a client-side trace is the whole story only when the connector is the
group's one consumer and traces the group from its start (spec/spark-connectors.md).
A trace survives restarts: a new incarnation resumes the file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec

from kipcheck.impl.tracing import Trace, quoted_name

LOG_ACTOR = "log"


def now_ms() -> int:
    return int(time.time() * 1000)


def trace_path(location: str | os.PathLike, machine: str, key: str) -> Path:
    directory = Path(location)
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{machine}.{quoted_name(key)}.jsonl"


def _history(path: Path) -> tuple[int | None, set[str]]:
    """(log end, actors that acquired and never left) of an existing share-partition trace; (None, {}) if new."""
    data = path.read_bytes() if path.exists() else b""
    lines = data[:data.rfind(b"\n") + 1].splitlines()  # a partial last line is cut by Trace
    if not lines:
        return None, set()
    log_end, actors = msgspec.json.decode(lines[0])["config"].get("start_offset", 0), set()
    for line in lines[1:]:
        record = msgspec.json.decode(line)
        if record["op"] == "append":
            log_end += record["args"]["count"]
        elif record["op"] == "acquire":
            actors.add(record["actor"])
        elif record["op"] == "leave":
            actors.discard(record["actor"])
    return log_end, actors


class SharePartitionTrace:
    """The share-partition trace of one (group, topic, partition), from one consumer's point of view."""

    def __init__(self, path: Path, profile: str, config: dict, actor: str) -> None:
        self.path, self.profile, self.config, self.actor = path, profile, dict(config), actor
        self.trace: Trace | None = None
        self.log_end, earlier_actors = _history(path)
        if self.log_end is not None:  # resumed: the consumers of earlier incarnations died with their process
            self.trace = Trace(path, {})
            for earlier in sorted(earlier_actors):
                self.trace.step(now_ms(), earlier, "leave", {})

    def acquired(self, at_ms: int, max_records: int, runs: list[list[int]]) -> None:
        if self.trace is None:
            self.log_end = runs[0][0]
            header = {"machine": "share-partition", "profile": self.profile,
                      "config": {**self.config, "start_offset": self.log_end}}
            self.trace = Trace(self.path, header)
        highest = runs[-1][1]
        if highest >= self.log_end:
            self.trace.step(at_ms, LOG_ACTOR, "append", {"count": highest + 1 - self.log_end})
            self.log_end = highest + 1
        self.trace.step(at_ms, self.actor, "acquire", {"max_records": max_records}, {"records": runs})

    def acknowledged(self, at_ms: int, batches: list[tuple[int, int, str]], error: str | None) -> None:
        assert self.trace is not None, "acknowledging records never acquired"
        args = {"batches": [{"first": first, "last": last, "type": kind} for first, last, kind in batches]}
        self.trace.step(at_ms, self.actor, "acknowledge", args, None if error is None else {"error": error})

    def left(self, at_ms: int) -> None:
        if self.trace is not None:
            self.trace.step(at_ms, self.actor, "leave", {})
            self.trace.close()


class ShareTraces:
    """The share-partition traces of one consumer, opened as partitions show up."""

    def __init__(self, location: str | os.PathLike, group: str, profile: str, config: dict, actor: str) -> None:
        self.location, self.group, self.profile, self.config, self.actor = location, group, profile, config, actor
        self.partitions: dict[tuple[str, int], SharePartitionTrace] = {}

    def partition(self, topic: str, partition: int) -> SharePartitionTrace:
        key = (topic, partition)
        if key not in self.partitions:
            path = trace_path(self.location, "share-partition", f"{self.group}:{topic}:{partition}")
            self.partitions[key] = SharePartitionTrace(path, self.profile, self.config, self.actor)
        return self.partitions[key]

    def close(self, at_ms: int) -> None:
        for trace in self.partitions.values():
            trace.left(at_ms)
        self.partitions.clear()


class IcTraces:
    """The ic traces of one group's committer: one per topic-partition."""

    def __init__(self, location: str | os.PathLike, group: str, actor: str) -> None:
        self.location, self.group, self.actor = location, group, actor
        self.traces: dict[tuple[str, int], Trace] = {}

    def _trace(self, topic: str, partition: int) -> Trace:
        key = (topic, partition)
        if key not in self.traces:
            path = trace_path(self.location, "ic", f"{self.group}:{topic}:{partition}")
            self.traces[key] = Trace(path, {"machine": "ic", "config": {}})
        return self.traces[key]

    def committed(self, at_ms: int, topic: str, partition: int, ranges: list[list[int]], error: str | None) -> None:
        observed = None if error is None else {"error": error}
        self._trace(topic, partition).step(at_ms, self.actor, "commit", {"ranges": ranges}, observed)

    def fetched(self, at_ms: int, topic: str, partition: int, stable_offset: int) -> None:
        self._trace(topic, partition).step(at_ms, self.actor, "fetch", {}, {"stable_offset": stable_offset})

    def close(self) -> None:
        for trace in self.traces.values():
            trace.close()
        self.traces.clear()
