"""The consumer's revoke-delay trace (shared/TRACE-FORMAT.md `revoke-delay`), in its own view.

    consumer_trace = ConsumerTrace(directory, group_id, member_id)
    consumer_trace.decision(decision)          # assign / revoke / lose, actor "coordinator"
    consumer_trace.poll(at_ms, records_from, start)
    consumer_trace.delay_revoke(at_ms, partitions, result); consumer_trace.commit(at_ms, tp, offset, error)
    consumer_trace.release(at_ms, partitions)  # a heartbeat acknowledging revocations (RD-11)

Files: `revoke-delay.consumer.<group>.<member>.jsonl` (impl/tracing.py
names them, as it names the coordinator's view), a new incarnation (`.2.jsonl`,
...) when the name is taken (a member id reused). spec/revoke-delay.md ("Who writes which trace") says what each side writes and
when. Writes from several threads are serialised; each line is flushed whole.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kipcheck.impl.consumer.ownership import Decision, PollStart
from kipcheck.impl.topic_partition import TopicPartition
from kipcheck.impl.tracing import COORDINATOR_ACTOR, open_revoke_delay_trace, partition_names


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
