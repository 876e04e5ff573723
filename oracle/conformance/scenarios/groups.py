"""Consumer-group scenarios: real confluent-kafka Consumers in classic and KIP-848 groups on the reference broker.

    result = SCENARIOS["groups-consumer-uniform"](work_dir)     # a ScenarioResult, like the share scenarios

Churn (one scenario per protocol and assignor): three members (each its own
process, group_member.py) consume a 6-partition topic that a producer keeps
writing to (200 records/s) while the group changes under them: three
members; one leaves (SIGTERM: clean close); one joins; one is killed -9 (its
session times out); after each change the scenario waits until the group
processes again. Checked: nothing produced is lost;
every record processed twice was first processed by the killed member at or
above its last commit (in the clean phases nothing is processed twice, since
members commit before letting a partition go); the group's committed offsets
end at the log end. The broker writes a revoke-delay trace of each KIP-848
member in the coordinator's view (spec/revoke-delay.md RD-12), judged with the
rest; classic groups write none (needs_traces=False): the clients are the judge.

Broker killed: a KIP-848 consumer commits as it goes; the broker is killed -9
right after a commit was answered and restarted; every offset answered NONE is
still committed, and the group resumes exactly there (nothing processed twice).
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker
from kipcheck.oracle.conformance.outside import Leaves
from kipcheck.oracle.conformance.scenarios.runner import (WAIT_S, ScenarioResult, check, portable_scenario,
                                                          run_scenario)

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "200", "group.min.session.timeout.ms": "1000",
               "group.consumer.session.timeout.ms": "3000", "group.consumer.heartbeat.interval.ms": "300"}
PARTITIONS, PRODUCE_RATE_PER_S = 6, 200
COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                      KafkaError.COORDINATOR_NOT_AVAILABLE}
Record = tuple[int, int]  # (partition, offset)


class MemberProcess:
    """One member process and what its log says so far: group_member.py (a confluent-kafka Consumer), or with
    `command` another module taking its log file last (revoke_member.py: an application on kipcheck's consumer)."""

    def __init__(self, name: str, broker: EmbeddedBroker, group: str, protocol: str, assignor: str,
                 revoke_s: float = 0.0, command: list[str] | None = None):
        self.name, self.log_path = name, broker.work_dir / f"member-{name}.jsonl"
        self.killed_at: float | None = None
        command = command or ["kipcheck.oracle.conformance.scenarios.group_member", broker.bootstrap, group, "work", protocol,
                              assignor, str(revoke_s)]
        with open(broker.work_dir / f"member-{name}.stderr", "ab") as errors:  # why a member died, if it did
            self.process = subprocess.Popen([sys.executable, "-m", *command, str(self.log_path)],
                                            stdout=subprocess.DEVNULL, stderr=errors)

    def events(self) -> list[dict]:
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def assigned(self) -> bool:
        return any(event["event"] == "assign" and event["partitions"] for event in self.events())

    def records(self) -> list[Record]:
        return [(event["partition"], event["offset"]) for event in self.events() if event["event"] == "record"]

    def last_commits(self) -> dict[int, int]:
        committed: dict[int, int] = {}
        for event in self.events():
            if event["event"] == "commit" and event["error"] is None:
                committed.update({int(partition): offset for partition, offset in event["offsets"].items()})
        return committed

    def ownership(self) -> list[tuple[int, float, float]]:
        """(partition, from, until) for every time this member owned a partition; until is inf if never let go."""
        held: dict[int, float] = {}
        spans = []
        for event in self.events():
            if event["event"] == "assign":
                held.update({partition: event["at"] for partition in event["partitions"]})
            elif event["event"] in ("revoke", "lost"):
                spans += [(partition, held.pop(partition), event["at"]) for partition in event["partitions"]
                          if partition in held]
        end = self.killed_at if self.killed_at is not None else float("inf")
        return spans + [(partition, start, end) for partition, start in held.items()]

    def stop(self, kill: bool = False) -> None:
        if kill and self.killed_at is None:
            self.killed_at = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _wait(condition, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


class SteadyProducer:
    """Produces to every partition at a steady rate in a thread, so membership changes happen under load."""

    def __init__(self, bootstrap: str, topic: str, rate_per_s: float = PRODUCE_RATE_PER_S):
        self.topic, self.interval_s = topic, 1 / rate_per_s
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
        self.delivered: set[Record] = set()
        self.errors: list = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._produce, daemon=True)
        self.thread.start()

    def _produce(self) -> None:
        for index in itertools.count():
            if self.stopping.wait(self.interval_s):
                break
            self.producer.produce(self.topic, value=f"record-{index}".encode(), partition=index % PARTITIONS,
                                  on_delivery=self._delivered)
            self.producer.poll(0)

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.delivered.add((message.partition(), message.offset()))

    def stop(self) -> set[Record]:
        self.stopping.set()
        self.thread.join()
        left = self.producer.flush(WAIT_S)
        check(not left and not self.errors, f"producing failed: {left} undelivered, errors {self.errors[:3]}")
        return set(self.delivered)


def _churn(broker: EmbeddedBroker, protocol: str, assignor: str, revoke_s: float) -> str:
    create_topic(broker.bootstrap, "work", PARTITIONS)
    members: dict[str, MemberProcess] = {}
    producer: SteadyProducer | None = None

    def processed() -> set[Record]:
        return {record for member in members.values() for record in member.records()}

    def settle(label: str) -> None:
        """Wait until what was produced a moment ago has been processed: the group works again."""
        _wait(lambda: producer.delivered, "the first records to be produced")
        target = set(producer.delivered)
        _wait(lambda: target <= processed(), f"the group to process again after {label}")

    try:
        members.update({name: MemberProcess(name, broker, "churn", protocol, assignor, revoke_s) for name in "abc"})
        producer = SteadyProducer(broker.bootstrap, "work")
        for name in "abc":
            _wait(lambda: members[name].assigned(), f"member {name} to be given partitions")
        settle("three members joined")
        members["b"].stop()
        check(any(event["event"] == "closed" for event in members["b"].events()), "member b did not close cleanly")
        settle("one left")
        members["d"] = MemberProcess("d", broker, "churn", protocol, assignor, revoke_s)
        _wait(members["d"].assigned, "the joining member to be given partitions")
        settle("one joined")
        members["a"].stop(kill=True)
        killed_commits = members["a"].last_commits()  # its log is flushed per event: complete after the kill
        before = processed()
        _wait(lambda: {partition for partition, _ in producer.delivered - before} == set(range(PARTITIONS)),
              "new records on every partition, the killed member's too")
        settle("one was killed")  # so its partitions must have moved to the others (its session expired)
        produced = producer.stop()
        _wait(lambda: produced <= processed(), "every record produced to be processed")
    finally:
        if producer is not None:
            producer.stopping.set()
        for member in members.values():
            member.stop()
    return _churn_verdict(broker, members, produced, killed_commits)


def _churn_verdict(broker: EmbeddedBroker, members: dict[str, MemberProcess], produced: set[Record],
                   killed_commits: dict[int, int]) -> str:
    processed = [record for member in members.values() for record in member.records()]
    check(produced <= set(processed), f"{len(produced - set(processed))} records never processed")
    twice = {record for record in set(processed) if processed.count(record) > 1}
    by_killed = set(members["a"].records())
    unexplained = {(partition, offset) for partition, offset in twice
                   if (partition, offset) not in by_killed or offset < killed_commits.get(partition, 0)}
    overlap = _owned_twice(members)
    check(overlap is None, "partition {} owned by members {} and {} at once".format(*overlap or ("", "", "")))
    check(not unexplained, f"records processed twice though committed first: {sorted(unexplained)[:10]}")
    ends = {partition: 1 + max(offset for p, offset in produced if p == partition) for partition in range(PARTITIONS)}
    committed = _committed(broker, "churn", "work", PARTITIONS)
    check(committed == ends, f"committed offsets {committed} do not end at the log end {ends}")
    rebalances = sum(1 for member in members.values() for event in member.events()
                     if event["event"] in ("assign", "revoke", "lost"))
    return (f"{len(produced)} records, none lost; {len(twice)} processed twice (all by the member killed -9, "
            f"above its last commit); {rebalances} assign/revoke/lost callbacks, no partition owned twice at once; "
            f"committed offsets at the log end")


def _owned_twice(members: dict[str, MemberProcess]) -> tuple[int, str, str] | None:
    """A partition two members owned at once (one's assign before the other's revoke completed), else None.

    Members log with one clock (time.monotonic() is system-wide), and a protocol that revokes before it
    assigns hands a partition over only after its owner's revoke callback returned.
    """
    spans = sorted((partition, start, end, name) for name, member in members.items()
                   for partition, start, end in member.ownership())
    for (partition, _, end, name), (next_partition, next_start, _, next_name) in zip(spans, spans[1:]):
        if partition == next_partition and next_start < end:
            return partition, name, next_name
    return None


def _committed(broker: EmbeddedBroker, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets, read by a consumer that does not join it (OffsetFetch); asked again while
    the coordinator is not there yet (Kafka's, loading after a restart, answers NOT_COORDINATOR)."""
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
    deadline = time.monotonic() + WAIT_S
    try:
        while True:
            try:
                answer = reader.committed([TopicPartition(topic, partition) for partition in range(partitions)],
                                          timeout=30)
                break
            except KafkaException as error:
                if error.args[0].code() not in COORDINATOR_MOVING or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        reader.close()
    return {entry.partition: entry.offset for entry in answer}


def churn_scenario(protocol: str, assignor: str):
    def scenario(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER, profile: str = "kafka-4.2",
                 revoke_s: float = 0.0) -> ScenarioResult:
        # revoke_s: how long members take to finish a revoked partition's work before letting it go.
        return run_scenario(f"groups-{protocol}-{assignor}", work_dir, FAST_GROUPS,
                            lambda broker: _churn(broker, protocol, assignor, revoke_s),
                            launcher, profile, needs_traces=False)
    scenario.__doc__ = f"Members leave, join and are killed -9 in a {protocol} group ({assignor}): nothing lost."
    return scenario


def _broker_killed_offsets(broker: EmbeddedBroker) -> str:
    create_topic(broker.bootstrap, "ledger", 3)
    produce(broker.bootstrap, "ledger", [(index % 3, None, f"entry-{index}".encode()) for index in range(90)])
    answered = _consume_and_commit(broker, "ledger-readers", 90)
    broker.kill_and_start()
    after = _committed(broker, "ledger-readers", "ledger", 3)
    check(after == answered, f"committed offsets answered before kill -9 {answered}, after restart {after}")
    produce(broker.bootstrap, "ledger", [(index % 3, None, f"late-{index}".encode()) for index in range(30)])
    resumed = _consume(broker, "ledger-readers", 30)
    again = [record for record in resumed if record[1] < answered[record[0]]]
    check(not again, f"records below the committed offsets processed again: {again[:10]}")
    check(len(set(resumed)) == 30, f"the group resumed with {len(set(resumed))} of the 30 new records")
    return f"offsets {answered} committed before kill -9 kept; the group resumed there with the 30 new records"


broker_killed_offsets = portable_scenario(
    "groups-broker-killed", _broker_killed_offsets,
    "The broker killed -9 right after a commit was answered: every committed offset survives the restart.",
    Leaves(consumer_groups=("ledger-readers",), topics=(("ledger", 3),)), FAST_GROUPS, needs_traces=False)


def _member(broker: EmbeddedBroker, group: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET})
    consumer.subscribe(["ledger"])
    return consumer


def _consume_and_commit(broker: EmbeddedBroker, group: str, expected: int) -> dict[int, int]:
    """Consume `expected` records, committing synchronously every 10; the offsets the last commits were answered for."""
    consumer, answered, seen = _member(broker, group), {}, 0
    deadline = time.monotonic() + WAIT_S
    try:
        while seen < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            seen += 1
            if seen % 10 == 0:  # commit everything consumed so far; keep what the broker answered NONE for
                answered.update({entry.partition: entry.offset for entry in consumer.commit(asynchronous=False)
                                 if entry.error is None and entry.offset >= 0})  # < 0: nothing new to commit
    finally:
        consumer.close()
    check(seen == expected, f"consumed {seen} of {expected} records before the broker was killed")
    return answered


def _consume(broker: EmbeddedBroker, group: str, expected: int) -> list[Record]:
    consumer, records = _member(broker, group), []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(records) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records.append((message.partition(), message.offset()))
        time.sleep(1.0)  # anything processed twice would arrive now
        while (message := consumer.poll(0.2)) is not None:
            if message.error() is None:
                records.append((message.partition(), message.offset()))
    finally:
        consumer.close()
    return records


SCENARIOS = {
    "groups-classic-range": churn_scenario("classic", "range"),
    "groups-classic-roundrobin": churn_scenario("classic", "roundrobin"),
    "groups-classic-cooperative-sticky": churn_scenario("classic", "cooperative-sticky"),
    "groups-consumer-uniform": churn_scenario("consumer", "uniform"),
    "groups-consumer-range": churn_scenario("consumer", "range"),
    "groups-broker-killed": broker_killed_offsets,
}
