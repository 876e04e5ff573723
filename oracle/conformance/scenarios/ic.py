"""Individual-commit and key-range scenarios: kio consumers sharing one partition by key range on a live broker.

    result = SCENARIOS["ic-key-range-sharing"](work_dir)     # a ScenarioResult, like the other scenarios

Each scenario creates a topic with `accept.range.fetch=true`, produces keyed
records with confluent-kafka, and drives kio consumers (impl/consumer) that
assign key-hash shares of the partition (model/key_range_assign.split), poll,
'process' and commit the offsets they processed with commit_ranges. The
consumers write their ic traces into the broker's trace dir beside the
coordinator's, so the runner judges both (spec/ic.md IC-14 to IC-16, IC-21).
What the clients must see: every record processed exactly once, by the
owner of its key hash, and the committed offset a plain confluent-kafka
consumer reads equal to the IC stable offset + 1 (IC-19).

`ic-group-key-sharing` lets the broker's KIP-848 coordinator split the
partition instead (the key-range assignor, spec/key-range-assign.md KR-12 to
KR-14): consumers subscribe with `group.remote.assignor=key-range-round-robin`,
members join and leave while records flow, and the coordinator's
key-range-assign and ic traces judge each assignment and each handoff.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kipcheck.impl.consumer import Consumer, TopicPartition
from kipcheck.impl.consumer.individual import KeySharingTraces
from kipcheck.impl.groups.assignors import KeyRangeRoundRobinAssignor
from kipcheck.model.key_hash import in_ranges, record_hash
from kipcheck.model.key_range_assign import split
from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.runner import check, named_scenario

TOPIC, GROUP, RECORDS = "shared-orders", "sharers", 400
TP = TopicPartition(TOPIC, 0)
JOIN_S = 120   # the most a scenario's consumers run together
STALL_S = 30   # no record processed by any of them for this long: they are stuck
STOP_S = 45    # a stopped consumer's poll in flight ends within its request timeout


def prepare(broker: EmbeddedBroker, records: int = RECORDS) -> None:
    create_topic(broker.bootstrap, TOPIC, 1, configs={"accept.range.fetch": "true"})
    produce(broker.bootstrap, TOPIC, [(0, f"user-{number % 37}".encode(), f"v{number}".encode())
                                      for number in range(records)])


def key_range_consumer(bootstrap: str, traces: KeySharingTraces | None = None, **settings) -> Consumer:
    """A kio consumer of the sharing group: small polls, so that sharers interleave."""
    return Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                     "fetch.max.wait.ms": 100, "max.poll.records": 10, **settings}, ic_traces=traces)


def consume(consumer: Consumer, processed: list[int], until: Callable[[], bool], share: tuple[int, int] | None = None,
            commit_every: int = 7) -> None:
    """Poll, process (append the offset), commit the processed offsets every few records, until `until()`.
    Checks each record's key hash lies in `share` (KR-10) when given."""
    batch: list[int] = []
    while not until():
        for record in consumer.poll(200):
            check(share is None or in_ranges(record_hash(record.key, record.offset), [share]),
                  f"offset {record.offset} is outside the consumer's key range")
            processed.append(record.offset)
            batch.append(record.offset)
            if len(batch) >= commit_every:
                consumer.commit_ranges({TP: [(offset, offset) for offset in batch]})
                batch.clear()
    if batch:
        consumer.commit_ranges({TP: [(offset, offset) for offset in batch]})


def run_together(work: list[tuple[Consumer, list[int], tuple[int, int] | None]], until: Callable[[], bool]) -> None:
    """Run the consumers on threads until `until()`, one of them fails, or they stop making progress (no record
    processed for STALL_S, or JOIN_S in all: records a broken broker never serves); then stop them all."""
    failures: list[BaseException] = []
    stop = threading.Event()

    def guarded(consumer, processed, share):
        try:
            consume(consumer, processed, lambda: until() or stop.is_set(), share)
        except BaseException as error:      # reported by the scenario, not lost in a thread
            failures.append(error)
            stop.set()

    threads = [threading.Thread(target=guarded, args=entry) for entry in work]
    for thread in threads:
        thread.start()
    started = last_change = time.monotonic()
    last_count = -1
    while any(thread.is_alive() for thread in threads) and not stop.wait(0.2):
        now, count = time.monotonic(), sum(len(processed) for _, processed, _ in work)
        if count != last_count:
            last_count, last_change = count, now
        elif now - last_change > STALL_S or now - started > JOIN_S:
            break
    stop.set()
    for thread in threads:
        thread.join(STOP_S)   # a poll in flight ends within its request timeout
    check(not any(thread.is_alive() for thread in threads), f"a consumer still runs {STOP_S} s after it was stopped")
    if failures:
        raise failures[0]
    check(until(), f"the consumers stopped making progress after {last_count} records")


def plain_committed(bootstrap: str) -> int:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, **QUIET})
    try:
        [committed] = consumer.committed([KafkaTopicPartition(TOPIC, 0)], timeout=30)
        return committed.offset
    finally:
        consumer.close()


def _exactly_once(broker: EmbeddedBroker, processed: list[int], records: int = RECORDS) -> None:
    check(len(processed) == len(set(processed)), f"{len(processed) - len(set(processed))} records processed twice")
    check(sorted(processed) == list(range(records)), f"{records - len(set(processed))} records never processed")
    committed = plain_committed(broker.bootstrap)
    check(committed == records, f"a plain consumer reads committed offset {committed}, not {records}")


def _sharing(broker: EmbeddedBroker) -> str:
    prepare(broker)
    traces = KeySharingTraces(broker.trace_dir)
    consumers = [key_range_consumer(broker.bootstrap, traces) for _ in range(4)]
    processed: list[list[int]] = [[] for _ in consumers]
    try:
        for consumer, share in zip(consumers, split(4)):
            consumer.assign({TP: [share]})
        run_together(list(zip(consumers, processed, split(4))),
                     lambda: sum(len(offsets) for offsets in processed) >= RECORDS)
    finally:
        for consumer in consumers:
            consumer.close()
        traces.close()
    _exactly_once(broker, [offset for offsets in processed for offset in offsets])
    check(all(offsets for offsets in processed), "a sharer got no record")
    return f"{RECORDS} records over 4 key ranges: {[len(offsets) for offsets in processed]}"


@contextmanager
def _two_sharers(broker: EmbeddedBroker) -> Iterator[tuple[Consumer, Consumer]]:
    """Two consumers of the group writing their ic trace; closed, and the trace with them, at the end."""
    traces = KeySharingTraces(broker.trace_dir)
    first, second = key_range_consumer(broker.bootstrap, traces), key_range_consumer(broker.bootstrap, traces)
    try:
        yield first, second
    finally:
        first.close()
        second.close()
        traces.close()


def _handoff(broker: EmbeddedBroker) -> str:
    prepare(broker)
    lower, upper = split(2)
    done_first: list[int] = []
    done_second: list[int] = []
    with _two_sharers(broker) as (first, second):
        first.assign({TP: []})
        consume(first, done_first, lambda: len(done_first) >= RECORDS // 3)
        first.assign({TP: [lower]})          # gives the upper half up, its processed offsets committed first
        second.assign({TP: [upper]})
        run_together([(first, done_first, lower), (second, done_second, upper)],
                     lambda: len(done_first) + len(done_second) >= RECORDS)
    _exactly_once(broker, done_first + done_second)
    check(len(done_second) >= RECORDS // 4, f"the new owner processed only {len(done_second)} records")
    return f"upper half handed over after {RECORDS // 3} records: {len(done_first)} + {len(done_second)}"


def _late_commit(broker: EmbeddedBroker) -> str:
    """A consumer gives the upper half up with its records processed and not committed, then commits every record
    it processed (a processing thread that outlived the handoff): it must commit only those it still owns and drop
    the others (IC-16), which the new owner gets, processes and commits."""
    records = RECORDS // 4
    prepare(broker, records)
    lower, upper = split(2)
    done_first: list[int] = []
    done_second: list[int] = []
    with _two_sharers(broker) as (first, second):
        first.assign({TP: []})
        for _ in range(200):                 # processed, not committed; a liveness bound
            if len(done_first) >= records:
                break
            done_first += [record.offset for record in first.poll(200)]
        check(sorted(done_first) == list(range(records)), f"{len(done_first)} of {records} records read")
        first.assign({TP: [lower]})          # nothing committed yet: the upper half's records are given up
        first.commit_ranges({TP: [(offset, offset) for offset in done_first]})
        second.assign({TP: [upper]})
        given_up = [offset for offset in done_first
                    if in_ranges(record_hash(f"user-{offset % 37}".encode(), offset), [upper])]
        # Until it processed them all, or every record is committed (nothing is left for it).
        consume(second, done_second, lambda: len(done_second) >= len(given_up)
                or second.committed([TP]) == {TP: records}, upper)
    check(sorted(done_second) == given_up, f"the new owner processed {len(done_second)} of the {len(given_up)} "
                                           "records given up: the old owner committed the others")
    committed = plain_committed(broker.bootstrap)
    check(committed == records, f"a plain consumer reads committed offset {committed}, not {records}")
    return f"{len(given_up)} of {records} records given up processed, committed by their new owner only"


def _broker_killed(broker: EmbeddedBroker) -> str:
    prepare(broker)
    answered: set[int] = set()
    for round_number in range(3):
        consumer = key_range_consumer(broker.bootstrap, **{"default.api.timeout.ms": 3000})
        consumer.assign({TP: [split(2)[round_number % 2]]})
        try:
            for _ in range(5):
                offsets = [record.offset for record in consumer.poll(500)]
                check(not set(offsets) & answered, f"committed records returned again: {sorted(set(offsets) & answered)}")
                if offsets:
                    consumer.commit_ranges({TP: [(offset, offset) for offset in offsets[::2]]})
                    answered |= set(offsets[::2])
            broker.kill_and_start()
        finally:
            consumer.close()
    reader = key_range_consumer(broker.bootstrap)
    reader.assign({TP: []})
    seen: list[int] = []
    try:
        for _ in range(200):
            if len(seen) >= RECORDS - len(answered):
                break
            seen += [record.offset for record in reader.poll(200)]
    finally:
        reader.close()
    check(not set(seen) & answered, f"commits lost by kill -9: {sorted(set(seen) & answered)[:10]}")
    check(set(seen) | answered == set(range(RECORDS)), "records neither committed nor read again")
    return f"{len(answered)} committed offsets survived three kill -9s"


GROUP_SETTINGS = {"group.consumer.assignors": f"uniform,range,{KeyRangeRoundRobinAssignor.name}",
                  "group.consumer.heartbeat.interval.ms": 500}
PHASE_RECORDS = 300


class Sharer:
    """A group member polling in its own thread: processes each poll's records, commits them before polling again
    (so a share it gives up at the next poll has nothing processed and uncommitted, IC-16)."""

    def __init__(self, bootstrap: str, traces: KeySharingTraces):
        self.consumer = key_range_consumer(bootstrap, traces, **{"group.remote.assignor": KeyRangeRoundRobinAssignor.name})
        self.processed: list[int] = []
        self.failure: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Sharer":
        self.consumer.subscribe([TOPIC])
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                records = self.consumer.poll(100)
                for record in records:
                    share = self.consumer.key_ranges(TP)
                    check(share is not None and (not share or in_ranges(record_hash(record.key, record.offset), share)),
                          f"offset {record.offset} is outside the consumer's key range {share}")
                    self.processed.append(record.offset)
                if records:
                    self.consumer.commit_ranges({TP: [(record.offset, record.offset) for record in records]})
        except BaseException as error:      # reported by the scenario, not lost in a thread
            self.failure = error
        finally:
            self.consumer.close()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(JOIN_S)
        check(not self.thread.is_alive(), f"a consumer still runs after {JOIN_S} s")


def _wait_for(condition: Callable[[], bool], sharers: list[Sharer], what: str) -> None:
    """Until `condition()` (a liveness bound, JOIN_S, not a timing assertion); a consumer's failure ends it."""
    deadline = time.monotonic() + JOIN_S
    while not condition():
        failed = [sharer.failure for sharer in sharers if sharer.failure is not None]
        if failed:
            raise failed[0]
        check(time.monotonic() < deadline, f"not reached in {JOIN_S} s: {what}")
        time.sleep(0.05)


def _shares_are(sharers: list[Sharer], count: int) -> Callable[[], bool]:
    return lambda: sorted(tuple(sharer.consumer.key_ranges(TP) or ()) for sharer in sharers) == \
        sorted((share,) for share in split(count))


def _group_sharing(broker: EmbeddedBroker) -> str:
    create_topic(broker.bootstrap, TOPIC, 1, configs={"accept.range.fetch": "true"})
    traces = KeySharingTraces(broker.trace_dir)
    produced, everyone = 0, []

    def produce_more() -> None:
        nonlocal produced
        produce(broker.bootstrap, TOPIC, [(0, f"user-{number % 37}".encode(), f"v{number}".encode())
                                          for number in range(produced, produced + PHASE_RECORDS)])
        produced += PHASE_RECORDS

    def processed() -> int:
        return sum(len(sharer.processed) for sharer in everyone)

    try:
        produce_more()
        live = [Sharer(broker.bootstrap, traces).start() for _ in range(3)]
        everyone += live
        _wait_for(_shares_are(live, 3), everyone, "three consumers holding a third each")
        _wait_for(lambda: processed() >= produced, everyone, "the first records processed")
        produce_more()                                   # in flight while the fourth joins
        fourth = Sharer(broker.bootstrap, traces).start()
        everyone.append(fourth)
        live.append(fourth)
        _wait_for(_shares_are(live, 4), everyone, "four consumers holding a quarter each")
        produce_more()
        _wait_for(lambda: processed() >= produced, everyone, "the records of four sharers processed")
        produce_more()                                   # in flight while one leaves
        leaving = live.pop(1)
        leaving.finish()
        _wait_for(_shares_are(live, 3), everyone, "three consumers holding a third each again")
        _wait_for(lambda: processed() >= produced, everyone, "every record processed")
    finally:
        for sharer in everyone:
            sharer.finish()
        traces.close()
    failed = [sharer.failure for sharer in everyone if sharer.failure is not None]
    if failed:
        raise failed[0]
    _exactly_once(broker, [offset for sharer in everyone for offset in sharer.processed], produced)
    check(bool(fourth.processed), "the consumer that joined processed nothing")
    return (f"{produced} records, 3 sharers, a 4th joining, one leaving: "
            f"{[len(sharer.processed) for sharer in everyone]} processed")


SCENARIOS = {
    "ic-key-range-sharing": named_scenario("ic-key-range-sharing", _sharing,
                                      "Four kio consumers share one partition by key range (KR-10) and commit "
                                      "ranges: each record processed once, every ic trace allowed."),
    "ic-key-handoff": named_scenario("ic-key-handoff", _handoff,
                                "A key range handed from one consumer to another (IC-15): nothing lost or "
                                "processed twice, the handoff judged."),
    "ic-late-commit": named_scenario("ic-late-commit", _late_commit,
                                "A consumer commits records after giving their key range up (IC-16): it commits "
                                "only those it still owns, and the new owner processes and commits the others."),
    "ic-broker-killed": named_scenario("ic-broker-killed", _broker_killed,
                                  "kill -9 of the broker between individual commits (IC-12): no answered commit "
                                  "lost, no committed record returned again."),
    "ic-group-key-sharing": named_scenario("ic-group-key-sharing", _group_sharing,
                                      "The coordinator's key-range assignor splits one partition among 3 kio "
                                      "consumers, then 4 as one joins, then 3 as one leaves (KR-12 to KR-14): "
                                      "each record processed once, every assignment and handoff judged.",
                                      GROUP_SETTINGS),
}
