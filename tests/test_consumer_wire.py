"""impl/consumer against the reference broker: KIP-983 for real, judged by the oracle, and seeded bugs it catches.

Every test that writes traces checks each of them with `check_file` (the consumer's own and the
coordinator's of every member, both in the broker's trace dir) and that both sides agree. One broker per
test, so a seeded bug's traces never meet another test's.
The seeded bugs are installed in this test process only (monkeypatch): the consumer's production path is
untouched.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kipcheck.impl.consumer import CommitFailed, Consumer, IllegalState, KafkaError, TopicPartition
from kipcheck.impl.consumer.fetcher import Fetcher
from kipcheck.impl.consumer.membership import GroupMembership
from kipcheck.impl.consumer.ownership import Ownership
from kipcheck.oracle.check import check_file
from kipcheck.oracle.conformance.scenarios.clients import create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.revoke_app import EventLog, ProcessingApp
from kipcheck.oracle.conformance.scenarios.revoke import traces_disagree

SETTINGS = {"group.consumer.heartbeat.interval.ms": "200", "group.consumer.session.timeout.ms": "3000",
            "group.min.session.timeout.ms": "1000"}
DEADLINE_S = 60


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", SETTINGS) as started:
        yield started


def verdicts(trace_dir: Path, pattern: str = "*.jsonl") -> dict[str, object]:
    return {path.name: check_file(path) for path in sorted(trace_dir.glob(pattern))}


def assert_all_allowed(trace_dir: Path) -> None:
    judged = verdicts(trace_dir)
    assert judged and all(verdict.status == "ok" for verdict in judged.values()), \
        "\n".join(verdict.summary() for verdict in judged.values())


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def consumer(broker, group: str, trace_dir=None, **settings) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     **{name.replace("_", "."): value for name, value in settings.items()}}, trace_dir=trace_dir)


# -- standalone, records, errors --------------------------------------------------------------------------


def test_assign_reads_plain_and_gzip_batches_from_the_committed_offset(broker):
    create_topic(broker.bootstrap, "plain-and-gzip", 1)
    produce(broker.bootstrap, "plain-and-gzip", [(0, b"k", b"plain-%d" % index) for index in range(5)])
    produce(broker.bootstrap, "plain-and-gzip", [(0, b"k", b"gzip-%d" % index) for index in range(5)],
            **{"compression.type": "gzip"})
    tp = TopicPartition("plain-and-gzip", 0)
    with consumer(broker, "standalone") as reader:
        reader.assign([tp])
        reader.commit({tp: 3})
        records = []
        wait_for(lambda: records.extend(reader.poll(200)) or len(records) >= 7, "7 records")
        assert [record.value for record in records] == [b"plain-3", b"plain-4"] + [b"gzip-%d" % i for i in range(5)]
        assert reader.position(tp) == 10 and reader.committed([tp]) == {tp: 3}


def test_every_codec_a_producer_compresses_with_is_read_back(broker):
    """confluent-kafka producing with each compression.type, one batch each: the consumer reads every record
    back with its key, value and offset."""
    codecs = ("gzip", "snappy", "lz4", "zstd")
    create_topic(broker.bootstrap, "compressed", 1)
    expected = []
    for codec in codecs:
        records = [(0, b"%s-key-%d" % (codec.encode(), index), b"%s-value-%d " % (codec.encode(), index) * 20)
                   for index in range(50)]
        produced = produce(broker.bootstrap, "compressed", records, **{"compression.type": codec})
        expected += [(offset, key, value) for (_, offset), (_, key, value) in zip(produced, records)]
    assert [offset for offset, _, _ in expected] == list(range(len(codecs) * 50))
    with consumer(broker, "compressed-readers") as reader:
        reader.assign([("compressed", 0)])
        records = []
        wait_for(lambda: records.extend(reader.poll(200)) or len(records) >= len(expected), "every record")
    assert [(record.offset, record.key, record.value) for record in records] == expected


def test_a_batch_decompressing_past_receive_message_max_bytes_is_an_error_not_silence(broker):
    create_topic(broker.bootstrap, "bomb", 1)
    produce(broker.bootstrap, "bomb", [(0, None, bytes(200_000))], **{"compression.type": "zstd"})
    with consumer(broker, "bomb-readers", fetch_max_bytes=10_000, receive_message_max_bytes=100_000) as reader:
        reader.assign([("bomb", 0)])
        with pytest.raises(KafkaError) as caught:
            wait_for(lambda: reader.poll(200), "a poll that fails")
    assert caught.value.error == "MESSAGE_TOO_LARGE" and "bomb:0" in str(caught.value)
    assert "receive.message.max.bytes (100000)" in str(caught.value)


def test_bad_calls_get_clear_errors(broker):
    create_topic(broker.bootstrap, "calls", 1)
    with pytest.raises(KafkaError) as caught:
        Consumer({"bootstrap.servers": "127.0.0.1:1"}).assign([("calls", 0)])
    assert caught.value.error == "NETWORK_EXCEPTION"
    no_group = Consumer({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(IllegalState, match="group.id"):
        no_group.commit({("calls", 0): 1})
    with pytest.raises(KafkaError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        no_group.assign([("calls", 7)])
    no_group.close()
    with pytest.raises(IllegalState, match="closed"):
        no_group.poll(0)
    with consumer(broker, "calls") as kip983:
        with pytest.raises(IllegalState, match="no rebalance listener"):
            kip983.subscribe(["calls"], on_revoke=lambda consumer, partitions: None)
        kip983.subscribe(["calls"])
        with pytest.raises(ValueError, match=">= 0"):
            kip983.commit({("calls", 0): -1})
    with consumer(broker, "calls-callback", rebalance_revoke_mode="callback") as today:
        today.subscribe(["calls"])
        with pytest.raises(IllegalState, match="delay_revoke"):
            today.delay_revoke([("calls", 0)])


def test_a_group_refusal_is_raised_by_the_next_poll(tmp_path):
    with EmbeddedBroker(tmp_path / "small", {**SETTINGS, "group.consumer.max.size": "1"}) as small:
        create_topic(small.bootstrap, "small", 1)
        with consumer(small, "small") as first, consumer(small, "small") as second:
            first.subscribe(["small"])
            wait_for(lambda: first.poll(50) is not None and first.assignment(), "the first member to join")
            second.subscribe(["small"])
            with pytest.raises(KafkaError) as caught:
                wait_for(lambda: second.poll(50) is None, "a refusal")
    assert caught.value.error == "GROUP_MAX_SIZE_REACHED"


# -- groups: partitions move, nothing lost, traces judged --------------------------------------------------


def run_apps(broker, topic: str, mode: str, trace_dir: Path, records: int, flush_ms=None,
             apps: list | None = None) -> list[tuple[int, int]]:
    """Two applications, a third joins, the first leaves; every record processed once it is all over.
    `flush_ms`: each partition's state flushed before its commit (the slow commit path); `apps` gets the apps."""
    create_topic(broker.bootstrap, topic, 6)
    produce(broker.bootstrap, topic, [(index % 6, None, b"%d" % index) for index in range(records)])
    apps, threads = [] if apps is None else apps, []

    def start() -> None:
        apps.append(ProcessingApp(broker.bootstrap, f"{topic}-group", topic, mode, 5, EventLog(), trace_dir,
                                  flush_ms=flush_ms))
        threads.append(threading.Thread(target=apps[-1].run, daemon=True))
        threads[-1].start()

    def processed() -> list[tuple[int, int]]:
        return [record for app in apps for record in app.log.records()]

    start()
    start()
    wait_for(lambda: len(set(processed())) >= records // 4, "a quarter of the records")
    start()
    wait_for(lambda: len(set(processed())) >= records // 2, "half of the records")
    apps[0].stop()
    threads[0].join(DEADLINE_S)
    wait_for(lambda: len(set(processed())) == records, "every record")
    for app, thread in zip(apps[1:], threads[1:]):
        app.stop()
        thread.join(DEADLINE_S)
    return processed()


@pytest.mark.parametrize("mode", ["delay", "callback"])
def test_partitions_move_under_load_with_nothing_lost_or_processed_twice(broker, mode):
    processed = run_apps(broker, f"moving-{mode}", mode, broker.trace_dir, 3000)
    assert len(processed) == len(set(processed)) == 3000
    assert_all_allowed(broker.trace_dir)
    consumer_traces = list(broker.trace_dir.glob("revoke-delay.consumer.*"))
    assert len(consumer_traces) == (3 if mode == "delay" else 0)  # the callback mode is not KIP-983's
    assert not traces_disagree(broker.trace_dir)


@pytest.mark.parametrize("mode", ["delay", "callback"])
def test_a_slow_commit_path_commits_only_flushed_state(broker, mode):
    """Each partition's state flushed (100 to 200 ms) before its commit: nothing processed twice, and no commit
    covers a record whose state its member had not flushed."""
    apps: list[ProcessingApp] = []
    processed = run_apps(broker, f"flushing-{mode}", mode, broker.trace_dir, 3000, (100, 200), apps)
    assert len(processed) == len(set(processed)) == 3000
    assert any(event["event"] == "flushed" for app in apps for event in app.log.events)
    assert [unflushed_commits(app) for app in apps] == [0, 0, 0]
    assert not traces_disagree(broker.trace_dir)


def test_the_naive_callback_commits_unflushed_state(broker):
    """The control: on_revoke commits what the workers finished, unflushed; the check above sees it."""
    apps: list[ProcessingApp] = []
    run_apps(broker, "flushing-naive", "naive", broker.trace_dir, 3000, (100, 200), apps)
    assert sum(unflushed_commits(app) for app in apps) > 0


def unflushed_commits(app: ProcessingApp) -> int:
    """Records `app` processed below an offset it committed, with no flush of its own covering them first."""
    flushed: dict[int, int] = {}
    processed: dict[int, list[int]] = {}
    found = 0
    for event in app.log.events:
        if event["event"] == "record":
            processed.setdefault(event["partition"], []).append(event["offset"])
        elif event["event"] == "flushed":
            flushed[event["partition"]] = max(flushed.get(event["partition"], 0), event["offset"])
        elif event["event"] == "commit":
            found += sum(1 for partition, offset in event["offsets"].items() for done in processed.get(partition, ())
                         if flushed.get(partition, 0) <= done < offset)
    return found


def test_the_naive_callback_is_seen_processing_records_twice(broker):
    """The control: an application that lets partitions go before their records are processed is caught."""
    processed = run_apps(broker, "moving-naive", "naive", broker.trace_dir, 3000)
    assert set(processed) == {(index % 6, index // 6) for index in range(3000)}
    assert len(processed) > len(set(processed))


# -- a member fenced while it delays --------------------------------------------------------------------------


def delaying_member(broker, topic: str, trace_dir: Path, delays: int, rebalance_timeout_ms: int = 1500) -> dict:
    """Member A owns both partitions; B joins; A delays the revoke `delays` times (forever: -1) before it commits
    and lets go. What A saw: each poll's lost partitions, and after the first loss, delay_revoke and commit."""
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [(index % 2, None, b"%d" % index) for index in range(20000)])
    a = consumer(broker, topic, trace_dir, max_poll_interval_ms=rebalance_timeout_ms, max_poll_records=5)
    b = consumer(broker, topic, trace_dir)
    seen: dict = {"lost": [], "revoked": False, "delays_left": delays}
    stop = threading.Event()

    def neighbour_loop() -> None:
        while not stop.is_set():
            b.poll(100)

    neighbour = threading.Thread(target=neighbour_loop, daemon=True)
    try:
        a.subscribe([topic])
        partitions: set[int] = set()
        wait_for(lambda: partitions.update(record.partition for record in a.poll(100)) or partitions == {0, 1},
                 "records from both partitions")
        b.subscribe([topic])
        neighbour.start()
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not (seen["lost"][1:] or seen["revoked"]):
            _delaying_poll(a, seen)
    finally:
        stop.set()
        if neighbour.is_alive():
            neighbour.join(DEADLINE_S)
        a.close()
        b.close()
    return seen


def _delaying_poll(a: Consumer, seen: dict) -> None:
    a.poll(50)
    time.sleep(0.05)  # processing what the poll returned: records stay buffered meanwhile
    if seen["lost"]:
        seen["lost"].append(a.lost_partitions())
        return
    if a.lost_partitions():
        lost = a.lost_partitions()
        seen["lost"].append(lost)
        seen["delay_after_loss"] = a.delay_revoke(lost)
        with pytest.raises(CommitFailed) as refused:
            a.commit({tp: 0 for tp in lost})
        seen["commit_after_loss"] = refused.value.error
        return
    revoking = a.to_be_revoked_partitions()
    if revoking and seen["delays_left"] != 0:
        a.delay_revoke(revoking)
        seen["delays_left"] -= 1
    elif revoking:
        a.commit({tp: a.position(tp) for tp in revoking})
        seen["revoked"] = True


def test_a_member_that_delays_past_its_rebalance_timeout_loses_its_partitions_once(broker):
    seen = delaying_member(broker, "fenced", broker.trace_dir, delays=-1)
    first, after = seen["lost"][0], seen["lost"][1]
    assert first == {TopicPartition("fenced", 0), TopicPartition("fenced", 1)}  # KIP-848 fences the whole member
    assert after == frozenset()  # reported by one poll only (RD-5)
    assert seen["delay_after_loss"] is False and seen["commit_after_loss"] == "ILLEGAL_GENERATION"
    assert_all_allowed(broker.trace_dir)
    assert not traces_disagree(broker.trace_dir)


def test_heartbeats_flow_while_the_application_blocks_in_a_callback(broker):
    """The callback mode blocks poll for twice the session timeout: the heartbeat thread keeps the member in."""
    create_topic(broker.bootstrap, "blocked", 2)
    lost, revoked = [], []

    def on_revoke(consumer, partitions):
        time.sleep(6)  # group.consumer.session.timeout.ms is 3000
        revoked.append(partitions)

    with consumer(broker, "blocked", rebalance_revoke_mode="callback") as a, \
            consumer(broker, "blocked", broker.trace_dir) as b:
        a.subscribe(["blocked"], on_revoke=on_revoke, on_lost=lambda consumer, partitions: lost.append(partitions))
        wait_for(lambda: a.poll(50) is not None and len(a.assignment()) == 2, "a to hold both partitions")
        b.subscribe(["blocked"])
        wait_for(lambda: a.poll(50) is not None and b.poll(50) is not None and revoked, "a's blocking revoke")
        wait_for(lambda: a.poll(50) is not None and b.poll(50) is not None and len(b.assignment()) == 1,
                 "b to get the revoked partition")
    assert not lost and len(revoked[0]) == 1
    assert_all_allowed(broker.trace_dir)
    assert not any('"lose"' in path.read_text() for path in broker.trace_dir.glob("revoke-delay.coordinator.*"))


# -- seeded bugs: each caught by the oracle ------------------------------------------------------------------


def test_a_revocation_acknowledged_before_the_commit_is_caught(broker, monkeypatch):
    original = GroupMembership._assigned

    def acknowledged_at_once(self, assignment, shares, at_ms):
        original(self, assignment, shares, at_ms)
        self._unreleased.clear()  # the seeded bug: a revoked partition is reported gone in the next heartbeat

    monkeypatch.setattr(GroupMembership, "_assigned", acknowledged_at_once)
    seen = delaying_member(broker, "early-ack", broker.trace_dir, delays=10)
    assert seen["revoked"]
    consumer_side = verdicts(broker.trace_dir, "revoke-delay.consumer.*")
    coordinator_side = verdicts(broker.trace_dir, "revoke-delay.coordinator.*")
    assert any(verdict.clause == "RD-11" for verdict in consumer_side.values()), consumer_side
    assert any(verdict.clause == "RD-10" for verdict in coordinator_side.values()), coordinator_side


def test_a_delay_accepted_after_the_loss_is_caught(broker, monkeypatch):
    original = Ownership.delay

    def delay_after_loss(self, partitions):
        original(self, {tp for tp in partitions if self.owns(tp)})
        return True  # the seeded bug: no check that the partitions are still held

    monkeypatch.setattr(Ownership, "delay", delay_after_loss)
    seen = delaying_member(broker, "late-delay", broker.trace_dir, delays=-1)
    assert seen["delay_after_loss"] is True
    caught = [verdict for verdict in verdicts(broker.trace_dir, "revoke-delay.consumer.*").values() if verdict.status != "ok"]
    assert [verdict.clause for verdict in caught] == ["RD-9"]


def test_records_returned_from_a_lost_partition_are_caught(broker, monkeypatch):
    """KAFKA-20321's kind of bug: buffered records outlive the loss of their partition and are returned."""
    monkeypatch.setattr(Fetcher, "forget", lambda self, partitions: None)
    original_take = Fetcher.take
    monkeypatch.setattr(Fetcher, "take", lambda self, partitions, limit: original_take(
        self, frozenset(self._buffers) | partitions, limit))
    delaying_member(broker, "lost-records", broker.trace_dir, delays=-1)
    caught = [verdict for verdict in verdicts(broker.trace_dir, "revoke-delay.consumer.*").values() if verdict.status != "ok"]
    assert [verdict.clause for verdict in caught] == ["RD-7"], caught
