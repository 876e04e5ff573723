"""Java scenarios: Apache Kafka's own clients (KafkaShareConsumer, KafkaConsumer) as the scenario's clients.

    result = SCENARIOS["java-share-explicit"](work_dir)                     # on a reference broker of its own
    result = SCENARIOS["java-share-explicit"](work_dir, shared=SharedBroker(kafka.bootstrap, work_dir),
                                             client_line="4.2")             # on a running broker (Apache Kafka)

The clients run in one JVM per scenario (oracle/kafka/java_clients.py drives
java/src/main/java/dev/kipcheck/kafka/ClientDriver.java), the producers are
confluent-kafka's. Each scenario checks what the Java clients saw against what
it produced: every record delivered, delivery counts as the acknowledgement
types allow (a record accepted or rejected is never delivered again, a record
released, left unacknowledged at close or held by a killed client comes back
with a higher count), the acknowledgement commits answered without error, and
at the end the share coordinator's lag (Admin.listShareGroupOffsets) at 0; for
consumer groups, no record lost or consumed twice, no partition owned by two
members at once, the committed offsets at the log end.

On a reference broker of its own, each scenario's broker runs with the embedded
target's settings (targets/embedded.py) and its traces are judged too. On a
broker it did not start (the Kafka target runs them on its cluster, after the
probes) it runs with that broker's settings, which must be the same test-sized
ones (a 2000 ms lock, a delivery limit of 3); that broker's traces are the
target's to judge. Where Java or Kafka's jars are missing, each is skipped with
the reason.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from kipcheck.oracle.conformance.outside import Leaves
from kipcheck.oracle.conformance.scenarios.clients import create_topic, produce
from kipcheck.oracle.conformance.scenarios.runner import (WAIT_S, ScenarioResult, SharedBroker, check, run_on_shared,
                                                          run_scenario, skipped)
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, GROUP_SETTINGS, embedded_settings
from kipcheck.oracle.kafka.java_clients import JavaClients, JavaRecord

CLIENT_LINE = "4.2"        # the Kafka release whose clients run against the reference broker
LOCK_MS = 2000             # the record lock duration of both targets (EMBEDDED_SETTINGS, KAFKA_SETTINGS)
EARLIEST = {"share.auto.offset.reset": "earliest"}   # a group config on Kafka: set per group, on either broker
# A classic group member that hears of a rebalance within a second (the brokers' side is GROUP_SETTINGS).
CLASSIC_CLIENT = {"group.protocol": "classic", "heartbeat.interval.ms": "500",
                  "partition.assignment.strategy":
                      "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}
Body = Callable[[SharedBroker, JavaClients], str]


def java_scenario(name: str, body: Body, doc: str, leaves: Leaves, needs_traces: bool = True, kafka_only: str = ""):
    """A scenario of the registry whose clients are Kafka's Java clients; runnable on any broker (`portable`),
    where what it `leaves` is read from the outside after it (runner.py). needs_traces=False: on the reference broker it writes no traces (classic groups), its clients are the judge;
    kafka_only: why it runs under Kafka's profiles only (what it uses is Kafka's, not the KIP text's)."""
    def scenario(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER, profile: str = "kafka-4.2",
                 shared: SharedBroker | None = None, client_line: str = CLIENT_LINE) -> ScenarioResult:
        reason = f"{kafka_only}: under --profile {profile} it is not run" \
            if kafka_only and not profile.startswith("kafka-") else java_unavailable(client_line)
        if reason:
            return skipped(name, reason, profile)

        def run(broker) -> str:
            with JavaClients(broker.bootstrap, Path(broker.work_dir) / f"{name}.java.log", client_line) as java:
                return body(broker, java)

        if shared is not None:
            return run_on_shared(name, shared, run, profile, leaves)
        return run_scenario(name, work_dir, {**embedded_settings(profile), **GROUP_SETTINGS}, run, launcher, profile,
                            needs_traces, leaves)
    scenario.__doc__ = doc
    scenario.portable = True
    return scenario


def java_unavailable(line: str) -> str:
    """Why Kafka `line`'s Java clients cannot run here ("" when they can): no Java, no Maven, no JDK to build."""
    from kipcheck.oracle.kafka.runtime import KafkaRuntime, KafkaUnavailable, programs_jar

    try:
        KafkaRuntime.resolve(line)
        programs_jar(line)
    except KafkaUnavailable as reason:
        return f"Apache Kafka's Java clients cannot run here: {reason}"
    return ""


# -- what every share scenario checks ---------------------------------------------------------------------------

def _produce(broker, topic: str, partitions: int, count: int, **config) -> set[tuple[int, int]]:
    create_topic(broker.bootstrap, topic, partitions)
    return set(produce(broker.bootstrap, topic, [(index % partitions, None, f"{topic}-{index}".encode())
                                                 for index in range(count)], **config))


def _where(records: list[JavaRecord]) -> set[tuple[int, int]]:
    return {(record.partition, record.offset) for record in records}


def _check_counts(delivered: list[JavaRecord]) -> None:
    """A record comes again only with a higher delivery count, and every count is at least 1."""
    seen: dict[tuple[int, int], int] = {}
    for record in delivered:
        key = (record.partition, record.offset)
        check(record.delivery_count is not None and record.delivery_count >= 1,
              f"{record.address} delivered with count {record.delivery_count}")
        check(record.delivery_count > seen.get(key, 0),
              f"{record.address} delivered again with count {record.delivery_count}, after {seen.get(key)}")
        seen[key] = record.delivery_count


def _check_acknowledged(java: JavaClients, results: list[dict]) -> int:
    """Every commitSync result and acknowledgement commit callback answered without error; how many there were."""
    failed = [result for result in results for error in result.values() if error is not None]
    failed += [event for event in java.events if event["event"] == "acknowledged" and event["error"] is not None]
    check(not failed, f"acknowledgements failed: {failed[:3]}")
    return len(results) + sum(event["event"] == "acknowledged" for event in java.events)


def _check_done(java: JavaClients, group: str, partitions: int, topic: str) -> None:
    """Every record of the topic delivered for good, as the share coordinator stores it (lag 0)."""
    deadline, offsets = time.monotonic() + WAIT_S, {}
    while time.monotonic() < deadline:
        offsets = java.share_group_offsets(group)
        if len(offsets) == partitions and all(offset.lag == 0 for offset in offsets.values()):
            return
        time.sleep(0.5)
    check(False, f"the share coordinator of {group} holds {offsets} for {topic}: not every record done (lag 0)")


# -- share groups -------------------------------------------------------------------------------------------------

def _share_implicit(broker, java: JavaClients) -> str:
    topic, group = "java-orders", "java-billing"
    produced = _produce(broker, topic, 3, 90)
    java.set_group_config(group, EARLIEST)
    consumers = [java.share_consumer(name, group, [topic]) for name in ("billing-a", "billing-b")]
    delivered, results = [], []
    deadline = time.monotonic() + WAIT_S
    while not produced <= _where(delivered) and time.monotonic() < deadline:
        for consumer in consumers:
            delivered += consumer.poll(300)
        consumers[0].commit_async()
        results.append(consumers[1].commit_sync())
    for consumer in consumers:
        consumer.close()
    missing = produced - _where(delivered)
    check(not missing, f"{len(missing)} of {len(produced)} records never delivered")
    _check_counts(delivered)
    acknowledged = _check_acknowledged(java, results)
    _check_done(java, group, 3, topic)
    return (f"{len(produced)} records on 3 partitions to 2 KafkaShareConsumers, implicit acknowledgement "
            f"({len(delivered)} deliveries, {acknowledged} acknowledgement commits, sync and async); lag 0")


def _share_explicit(broker, java: JavaClients) -> str:
    """ACCEPT, RELEASE and REJECT by offset; released records come back with count 2 and are accepted."""
    topic, group = "java-tasks", "java-workers"
    produced = _produce(broker, topic, 1, 12)
    java.set_group_config(group, EARLIEST)
    consumer = java.share_consumer("worker", group, [topic], {"share.acknowledgement.mode": "explicit"})
    delivered, results, final = [], [], set()
    deadline, rounds = time.monotonic() + WAIT_S, 0
    while not (produced <= _where(delivered) and _where(delivered) <= final) and time.monotonic() < deadline:
        records = consumer.poll(500)
        check(not _where(records) & final, f"{sorted(_where(records) & final)} delivered after ACCEPT or REJECT")
        delivered += records
        for kind in ("ACCEPT", "RELEASE", "REJECT"):
            chosen = [record for record in records if _kind(record) == kind]
            consumer.acknowledge(chosen, kind)
            final |= _where(chosen) if kind != "RELEASE" else set()
        rounds += 1
        if rounds % 2:
            results.append(consumer.commit_sync())
        else:
            consumer.commit_async()
    consumer.close()
    _check_counts(delivered)
    released = {(record.partition, record.offset) for record in delivered if _kind(record) == "RELEASE"}
    again = {(record.partition, record.offset): record.delivery_count for record in delivered
             if record.delivery_count > 1}
    check(produced <= final, f"{len(produced - final)} records never accepted or rejected")
    check(set(again) == released and set(again.values()) <= {2},
          f"redelivered {again}, expected the released offsets {sorted(released)} once more, with count 2")
    acknowledged = _check_acknowledged(java, results)
    _check_done(java, group, 1, topic)
    return (f"12 records: {len(released)} released and redelivered with count 2, {len(produced) - len(released)} "
            f"accepted or rejected once ({acknowledged} acknowledgement commits, sync and async); lag 0")


def _kind(record: JavaRecord) -> str:
    """The explicit scenario's choice: a record is released on its first delivery when its offset is 0 mod 3."""
    if record.delivery_count > 1:
        return "ACCEPT"
    return ("RELEASE", "REJECT", "ACCEPT")[record.offset % 3]


def _share_renew(broker, java: JavaClients) -> str:
    """Records renewed (RENEW) for three lock durations stay with their holder; another member never gets them."""
    topic, group = "java-renewed", "java-renewers"
    produced = _produce(broker, topic, 1, 5)
    java.set_group_config(group, EARLIEST)
    explicit = {"share.acknowledgement.mode": "explicit"}
    holder, other = (java.share_consumer(name, group, [topic], explicit) for name in ("holder", "other"))
    held = _poll_until(holder, lambda records: bool(records))
    results, stolen, renewals = [], [], 0
    renew_until = time.monotonic() + 3 * LOCK_MS / 1000
    while time.monotonic() < renew_until:
        holder.acknowledge(held, "RENEW")
        results.append(holder.commit_sync())
        renewals += 1
        stolen += other.poll(LOCK_MS // 4)
        held = holder.poll(100) or held     # Kafka's client hands renewed records back to be acknowledged again
    holder.acknowledge(held, "ACCEPT")
    results.append(holder.commit_sync())
    stolen += other.poll(1000)
    holder.close()
    other.close()
    check(not _where(stolen) & _where(held), f"records renewed by their holder went to another member: {stolen}")
    check(all(record.delivery_count == 1 for record in held), f"renewed records redelivered: {held}")
    _check_acknowledged(java, results)
    rest = produced - _where(held)
    check(rest <= _where(stolen), f"records never held nor given to the other member: {sorted(rest - _where(stolen))}")
    _check_done(java, group, 1, topic)
    return (f"{len(held)} records renewed {renewals} times over {3 * LOCK_MS} ms (lock {LOCK_MS} ms), never given "
            f"to the other member, then accepted; lag 0")


def _poll_until(consumer, done: Callable[[list[JavaRecord]], bool]) -> list[JavaRecord]:
    deadline, records = time.monotonic() + WAIT_S, []
    while not done(records) and time.monotonic() < deadline:
        records += consumer.poll(500)
    check(done(records), f"{consumer.name} did not get what it waited for within {WAIT_S:.0f} s: {records}")
    return records


def _share_record_limit(broker, java: JavaClients) -> str:
    """share.acquire.mode=record_limit: no member acquires more than max.poll.records at once, so a second member
    gets records of one producer batch that the first is still working through."""
    topic, group, limit = "java-limited", "java-limiters", 5
    produced = _produce(broker, topic, 1, 40, **{"linger.ms": 200})   # one batch of 40
    java.set_group_config(group, EARLIEST)
    settings = {"share.acquire.mode": "record_limit", "max.poll.records": limit}
    consumers = [java.share_consumer(name, group, [topic], settings) for name in ("first", "second")]
    polls: dict[str, list[list[JavaRecord]]] = {consumer.name: [] for consumer in consumers}
    delivered: list[JavaRecord] = []
    deadline = time.monotonic() + WAIT_S
    while not produced <= _where(delivered) and time.monotonic() < deadline:
        for consumer in consumers:
            polls[consumer.name].append(consumer.poll(300))
            delivered += polls[consumer.name][-1]
    results = [consumer.commit_sync() for consumer in consumers]   # the last poll's records (close releases them)
    for consumer in consumers:
        consumer.close()
    _check_acknowledged(java, results)
    check(produced <= _where(delivered), f"{len(produced - _where(delivered))} of 40 records never delivered")
    largest = max(len(poll) for got in polls.values() for poll in got)
    check(largest <= limit, f"a poll gave {largest} records, over max.poll.records {limit}")
    shares = {name: len(_where([r for poll in got for r in poll])) for name, got in polls.items()}
    check(all(shares.values()), f"one member took the whole batch of 40 ({shares}): acquisition not held to {limit}")
    _check_counts(delivered)
    _check_done(java, group, 1, topic)
    return f"one batch of 40 records shared {shares} in polls of at most {limit} records; lag 0"


def _share_close(broker, java: JavaClients) -> str:
    """Records left unacknowledged at close, and records held by a JVM killed -9, come back with a higher count;
    records accepted before the close never do."""
    topic, group = "java-jobs", "java-crew"
    produced = _produce(broker, topic, 1, 20)
    java.set_group_config(group, EARLIEST)
    explicit = {"share.acknowledgement.mode": "explicit"}
    closing = java.share_consumer("closing", group, [topic], explicit)
    first = _poll_until(closing, bool)
    accepted = [record for record in first if record.offset % 2 == 0]
    closing.acknowledge(accepted, "ACCEPT")
    closing.close()   # the odd offsets were never acknowledged
    with JavaClients(broker.bootstrap, Path(broker.work_dir) / "java-share-close.killed.log",
                     java.line) as doomed_jvm:
        doomed = doomed_jvm.share_consumer("doomed", group, [topic], explicit)
        held = _poll_until(doomed, bool)
        doomed_jvm.kill()
    survivor = java.share_consumer("survivor", group, [topic], explicit)
    earlier = {(record.partition, record.offset): record.delivery_count for record in first + held}
    returning = set(earlier) - _where(accepted)
    later: list[JavaRecord] = []
    deadline = time.monotonic() + WAIT_S
    while not produced - _where(accepted) <= _where(later) and time.monotonic() < deadline:
        records = survivor.poll(500)
        survivor.acknowledge(records, "ACCEPT")
        later += records
    results = [survivor.commit_sync()]
    survivor.close()
    again = _where(later) & _where(accepted)
    check(not again, f"accepted records delivered again: {sorted(again)}")
    check(returning <= _where(later), f"records left at close or held by the killed JVM never came back: "
                                      f"{sorted(returning - _where(later))}")
    lower = {record.address: (earlier[key], record.delivery_count) for record in later
             if (key := (record.partition, record.offset)) in earlier and record.delivery_count <= earlier[key]}
    check(not lower, f"records came back without a higher delivery count (before, after): {lower}")
    _check_counts(first + held)
    _check_acknowledged(java, results)
    _check_done(java, group, 1, topic)
    return (f"{len(first) - len(accepted)} records left unacknowledged at close and {len(held)} held by a JVM "
            f"killed -9 came back with a higher count; {len(accepted)} accepted never did; lag 0")


# -- consumer groups ----------------------------------------------------------------------------------------------

def _groups(protocol: Callable[[], dict[str, str]], label: str) -> Body:
    def body(broker, java: JavaClients) -> str:
        topic, group, partitions = f"java-{label}-work", f"java-{label}-readers", 4
        produced = _produce(broker, topic, partitions, 40)
        first = java.consumer("first", group, [topic], protocol())
        consumed = _consume_until([first], lambda seen: len(seen) >= 10)
        second = java.consumer("second", group, [topic], protocol())
        consumed += _consume_until([first, second], lambda seen: bool(second.events("assigned")) and
                                   any(event["partitions"] for event in second.events("assigned")))
        produced |= _produce_more(broker, topic, partitions, 40, 40)
        consumed += _consume_until([first, second], lambda seen: produced <= _where(consumed + seen))
        first.commit_async()
        first.close()   # its partitions go to the second member, committed first
        produced |= _produce_more(broker, topic, partitions, 40, 80)
        consumed += _consume_until([second], lambda seen: produced <= _where(consumed + seen))
        second.commit_sync()
        second.close()
        return _groups_verdict(java, group, topic, partitions, produced, consumed, label)
    return body


def _produce_more(broker, topic: str, partitions: int, count: int, start: int) -> set[tuple[int, int]]:
    return set(produce(broker.bootstrap, topic, [(index % partitions, None, f"{topic}-{index}".encode())
                                                 for index in range(start, start + count)]))


def _consume_until(consumers, done: Callable[[list[JavaRecord]], bool]) -> list[JavaRecord]:
    seen: list[JavaRecord] = []
    deadline = time.monotonic() + WAIT_S
    while not done(seen) and time.monotonic() < deadline:
        for consumer in consumers:
            seen += consumer.poll(200)
    check(done(seen), f"the group did not get there within {WAIT_S:.0f} s ({len(seen)} records consumed)")
    return seen


def _groups_verdict(java: JavaClients, group: str, topic: str, partitions: int, produced: set, consumed: list,
                    label: str) -> str:
    where = [(record.partition, record.offset) for record in consumed]
    check(produced <= set(where), f"{len(produced - set(where))} of {len(produced)} records never consumed")
    twice = sorted({key for key in where if where.count(key) > 1})
    check(not twice, f"records consumed twice though committed before their partition moved: {twice[:10]}")
    overlap = _owned_twice(java.events)
    check(overlap is None, f"partition {overlap} owned by two members at once")
    failed = [event for event in java.events if event["event"] == "commit" and event["error"] is not None]
    check(not failed, f"commits failed: {failed[:3]}")
    ends = {f"{topic}-{partition}": 1 + max(offset for p, offset in produced if p == partition)
            for partition in range(partitions)}
    committed = java.consumer_group_offsets(group)
    check(committed == ends, f"committed offsets {committed} do not end at the log end {ends}")
    moves = sum(event["event"] in ("assigned", "revoked", "lost") for event in java.events)
    return (f"{len(produced)} records, each consumed once by 2 KafkaConsumers ({label}) as one joined and one "
            f"left; {moves} rebalance callbacks, no partition owned twice; committed offsets at the log end")


def _owned_twice(events: list[dict]) -> str | None:
    """A partition assigned to a member before the member holding it had revoked or lost it, else None."""
    owner: dict[str, str] = {}
    for event in sorted(events, key=lambda event: event["seq"]):
        for partition in event.get("partitions", ()):
            if event["event"] == "assigned":
                if owner.get(partition, event["client"]) != event["client"]:
                    return partition
                owner[partition] = event["client"]
            elif owner.get(partition) == event["client"]:
                del owner[partition]
    return None


SCENARIOS = {
    "java-share-implicit": java_scenario(
        "java-share-implicit", _share_implicit,
        "Two KafkaShareConsumers, implicit acknowledgement, commitSync and commitAsync: every record delivered.",
        Leaves(share_groups=("java-billing",), topics=(("java-orders", 3),))),
    "java-share-explicit": java_scenario(
        "java-share-explicit", _share_explicit,
        "A KafkaShareConsumer accepts, releases and rejects: released records come back with count 2.",
        Leaves(share_groups=("java-workers",), topics=(("java-tasks", 1),))),
    "java-share-renew": java_scenario(
        "java-share-renew", _share_renew,
        "A KafkaShareConsumer renews its records (RENEW) past their lock: no other member gets them.",
        Leaves(share_groups=("java-renewers",), topics=(("java-renewed", 1),)),
        kafka_only="RENEW is Kafka 4.2's (KIP-1222), the KIP's text has none"),
    "java-share-record-limit": java_scenario(
        "java-share-record-limit", _share_record_limit,
        "share.acquire.mode=record_limit: a batch is shared in acquisitions of at most max.poll.records.",
        Leaves(share_groups=("java-limiters",), topics=(("java-limited", 1),))),
    "java-share-close": java_scenario(
        "java-share-close", _share_close,
        "Records left at close and held by a killed JVM come back with a higher count; accepted ones never.",
        Leaves(share_groups=("java-crew",), topics=(("java-jobs", 1),))),
    "java-groups-classic": java_scenario(
        "java-groups-classic", _groups(lambda: dict(CLASSIC_CLIENT), "classic"),
        "Two KafkaConsumers in a classic group (cooperative-sticky) as one joins and one leaves: each record once.",
        Leaves(consumer_groups=("java-classic-readers",), topics=(("java-classic-work", 4),)), needs_traces=False),
    "java-groups-consumer": java_scenario(
        "java-groups-consumer", _groups(lambda: {"group.protocol": "consumer"}, "consumer"),
        "Two KafkaConsumers in a KIP-848 group as one joins and one leaves: each record once.",
        Leaves(consumer_groups=("java-consumer-readers",), topics=(("java-consumer-work", 4),))),
}
