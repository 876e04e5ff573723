"""Revoke-delay traces (shared/TRACE-FORMAT.md `revoke-delay`), as the consumer and the coordinator write them.

    trace = open_revoke_delay_trace(directory, "consumer", group_id, member_id)   # or "coordinator"
    consumer_trace = ConsumerTrace(directory, group_id, member_id)
    consumer_trace.decision(decision)          # assign / revoke / lose, actor "coordinator"
    consumer_trace.poll(at_ms, records_from, start)
    consumer_trace.delay_revoke(at_ms, partitions, result); consumer_trace.commit(at_ms, tp, offset, error)
    consumer_trace.release(at_ms, partitions)  # a heartbeat acknowledging revocations (RD-11)

Files: `revoke-delay.<view>.<group>.<member>.jsonl`, a new incarnation
(`.2.jsonl`, ...) when the name is taken (a broker restarted, a member id
reused). The coordinator's view has `config.view = "coordinator"` (RD-12).
spec/revoke-delay.md ("Who writes which trace") says what each side writes and
when. Writes from several threads are serialised; each line is flushed whole.
"""

from __future__ import annotations

import threading
import urllib.parse
from pathlib import Path

from kipcheck.impl.consumer.ownership import Decision, PollStart
from kipcheck.impl.consumer.records import TopicPartition
from kipcheck.impl.share.tracing import Trace
from kipcheck.impl.storage import Storage

COORDINATOR_ACTOR = "coordinator"


def open_revoke_delay_trace(directory: str | Path, view: str, group_id: str, member_id: str,
                            storage: Storage | None = None) -> Trace:
    """A new revoke-delay trace file (a new incarnation if one exists), written through `storage`."""
    config = {"view": view} if view == "coordinator" else {}
    return open_new_trace(directory, f"revoke-delay.{view}.{safe_name(group_id)}.{safe_name(member_id)}",
                          {"machine": "revoke-delay", "config": config}, storage)


def open_new_trace(directory: str | Path, stem: str, header: dict, storage: Storage | None = None) -> Trace:
    """A new trace file `<stem>.jsonl`, or `<stem>.<incarnation>.jsonl` if taken (a broker restarted)."""
    directory, storage = Path(directory), storage or Storage()
    storage.make_dirs(directory)
    path, incarnation = directory / f"{stem}.jsonl", 1
    while path.exists():
        incarnation += 1
        path = directory / f"{stem}.{incarnation}.jsonl"
    return Trace(path, header, storage)


def safe_name(name: str) -> str:
    """A readable, reversible file name part: dots escaped too, so it never looks like an incarnation."""
    return urllib.parse.quote(name, safe="-_").replace(".", "%2E")


def partition_names(partitions) -> list[str]:
    return sorted(str(tp) for tp in partitions)


class ConsumerTrace:
    def __init__(self, directory: str | Path, group_id: str, member_id: str):
        self.actor = member_id
        self._trace = open_revoke_delay_trace(directory, "consumer", group_id, member_id)
        self._lock = threading.Lock()

    def _step(self, at_ms: int, actor: str, op: str, args: dict, observed: dict | None = None) -> None:
        with self._lock:
            self._trace.step(at_ms, actor, op, args, observed)

    def decision(self, decision: Decision) -> None:
        self._step(decision.at_ms, COORDINATOR_ACTOR, decision.kind, {"partitions": partition_names(decision.partitions)})

    def poll(self, at_ms: int, records_from, start: PollStart) -> None:
        self._step(at_ms, self.actor, "poll", {}, {
            "records_from": partition_names(records_from), "to_be_revoked": partition_names(start.to_be_revoked),
            "lost": partition_names(start.lost), "revoked": partition_names(start.revoked)})

    def delay_revoke(self, at_ms: int, partitions, result: bool) -> None:
        self._step(at_ms, self.actor, "delay_revoke", {"partitions": partition_names(partitions)}, {"result": result})

    def commit(self, at_ms: int, tp: TopicPartition, offset: int, error: str) -> None:
        self._step(at_ms, self.actor, "commit", {"partition": str(tp), "offset": offset}, {"error": error})

    def release(self, at_ms: int, partitions) -> None:
        self._step(at_ms, self.actor, "release", {"partitions": partition_names(partitions)})

    def close(self) -> None:
        with self._lock:
            self._trace.close()
