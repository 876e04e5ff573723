"""A plain consumer-group member in its own process (so a scenario can kill it -9): consumes, commits, logs.

    python -m kipcheck.oracle.conformance.scenarios.group_member BOOTSTRAP GROUP TOPIC PROTOCOL ASSIGNOR REVOKE_S LOG_FILE

PROTOCOL is `classic` or `consumer` (KIP-848); ASSIGNOR is the classic
client-side one (range, roundrobin, cooperative-sticky) or, for `consumer`,
the server assignor to ask for (uniform, range; `-` for the group's default).
It appends one JSON line per event to LOG_FILE, flushed at once so a kill -9
loses nothing already written:
  {"event": "record", "partition": P, "offset": O}      a record it processed
  {"event": "assign" | "revoke" | "lost", "partitions": [...], "at": T}
                                                        T: time.monotonic(), one clock for every
                                                        process, so a scenario can order events
  {"event": "commit", "offsets": {P: next offset}, "error": null | "..."}
  {"event": "closed"}                                   after a clean close
Commits: synchronous, of every processed partition, at most every
COMMIT_INTERVAL_S and always before a revoked partition is let go (in the
revoke callback, after REVOKE_S seconds spent finishing the
partition's work), so in a clean run no record is processed twice. A lost
partition is not committed (another member may own it). SIGTERM closes it
cleanly (leave the group, final commit); SIGKILL is the crash a scenario wants.
"""

from __future__ import annotations

import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kipcheck.oracle.conformance.scenarios.clients import QUIET

COMMIT_INTERVAL_S = 0.5
LIFETIME_S = 600  # a member left behind by a failed scenario ends on its own


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str, assignor: str, revoke_s: str,
                 log_path: str):
        self.topic, self.log = topic, open(log_path, "a", encoding="utf-8")
        self.revoke_s = float(revoke_s)
        self.processed: dict[int, int] = {}   # partition -> next offset to commit
        self.committed: dict[int, int] = {}
        self.stop_asked: list = []  # SIGTERM appends to it
        config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "group.protocol": protocol, **QUIET}
        if protocol == "classic":
            config.update({"partition.assignment.strategy": assignor, "session.timeout.ms": 3000,
                           "heartbeat.interval.ms": 300})
        elif assignor != "-":
            config["group.remote.assignor"] = assignor
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost)

    def write(self, **event) -> None:
        self.log.write(json.dumps(event) + "\n")
        self.log.flush()

    def run(self) -> None:
        deadline, last_commit = time.monotonic() + LIFETIME_S, time.monotonic()
        while not self.stop_asked and time.monotonic() < deadline:
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.write(event="record", partition=message.partition(), offset=message.offset())
                self.processed[message.partition()] = message.offset() + 1
            if time.monotonic() - last_commit >= COMMIT_INTERVAL_S:
                self.commit(list(self.processed))
                last_commit = time.monotonic()
        self.commit(list(self.processed))
        self.consumer.close()  # leaves the group; the revoke callback commits first
        self.write(event="closed")

    def commit(self, partitions: list[int]) -> None:
        offsets = {partition: self.processed[partition] for partition in partitions
                   if partition in self.processed and self.committed.get(partition) != self.processed[partition]}
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=[TopicPartition(self.topic, partition, offset)
                                          for partition, offset in offsets.items()], asynchronous=False)
            self.committed.update(offsets)
            self.write(event="commit", offsets=offsets, error=None)
        except KafkaException as error:
            self.write(event="commit", offsets=offsets, error=str(error.args[0]))

    def _assigned(self, consumer, partitions) -> None:
        self.write(event="assign", partitions=sorted(tp.partition for tp in partitions), at=time.monotonic())

    def _revoked(self, consumer, partitions) -> None:
        revoked = sorted(tp.partition for tp in partitions)
        time.sleep(self.revoke_s)
        self.commit(revoked)
        for partition in revoked:
            self.processed.pop(partition, None)
            self.committed.pop(partition, None)
        self.write(event="revoke", partitions=revoked, at=time.monotonic())

    def _lost(self, consumer, partitions) -> None:
        lost = sorted(tp.partition for tp in partitions)
        for partition in lost:
            self.processed.pop(partition, None)
            self.committed.pop(partition, None)
        self.write(event="lost", partitions=lost, at=time.monotonic())


def main(argv: list[str]) -> int:
    stop_asked = []
    signal.signal(signal.SIGTERM, lambda *_: stop_asked.append(True))  # before the client exists: never lost
    member = Member(*argv)
    member.stop_asked = stop_asked
    member.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
