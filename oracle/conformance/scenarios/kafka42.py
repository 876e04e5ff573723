"""Kafka 4.2 scenarios: what Apache Kafka 4.2's share groups add to KIP-932, spoken on the wire through kio.

    result = SCENARIOS["kafka42-renew"](work_dir)      # a ScenarioResult, like the other scenarios

confluent-kafka (librdkafka 2.16) sends neither RENEW nor ShareAcquireMode, so
these scenarios speak ShareFetch and ShareAcknowledge v1 and v2 themselves,
through kio's own schemas (WireMember), after a real producer wrote the
records. Each checks the answers the client gets, then the broker's traces are
judged (spec/share-partition.md SP-11, SP-40, SP-41, SP-42, SP-43): the
record_limit mode, RENEW (v2, IsRenewAck; a renewing ShareFetch fetches
nothing), acknowledgements around SPSO, and redelivery throttled near the
delivery limit. Under `kip` the same requests must get the KIP
text's answers: RENEW and shared offsets are malformed (INVALID_REQUEST), and
every fetch is held to MaxRecords anyway.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from kio.schema.errors import ErrorCode

from kipcheck.impl.broker.metadata import topic_id_of
from kipcheck.oracle.conformance.scenarios.clients import create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import DEFAULT_LAUNCHER, EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.runner import WAIT_S, ScenarioResult, check, run_scenario
from kipcheck.oracle.conformance.probes.raw_client import RawClient

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
GAP, ACCEPT, RELEASE, REJECT, RENEW = range(5)          # AcknowledgeTypes on the wire
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1                    # ShareAcquireMode
EARLIEST = {"share.auto.offset.reset": "earliest"}
Batch = tuple[int, int, int]                            # (first, last, type) to acknowledge, or (first, last, count)


class WireMember:
    """One member of a share group on one single-partition topic, over its own connection.

    `fetch` and `acknowledge` number the session epochs themselves; `version` 1 or 2 picks the request version.
    """

    def __init__(self, port: int, group: str, member: str, topic: str):
        self.client = RawClient(port)
        self.group, self.member, self.topic, self.epoch = group, member, topic, 0
        joined = self.client.request(SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=0,
                                     subscribed_topic_names=[topic])
        check(joined.error_code == ErrorCode.none, f"ShareGroupHeartbeat answered {joined.error_code.name}")

    def close(self) -> None:
        self.client.close()

    def topics(self, acks: list[Batch]) -> list[dict]:
        return [{"topic_id": topic_id_of(self.topic), "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]} for first, last, kind in acks]}]}]

    def fetch(self, max_records: int, acks: list[Batch] = (), version: int = 2, mode: int = BATCH_OPTIMIZED,
              renew: bool = False, wait_ms: int = 500, forget: bool = False):
        """One ShareFetch; its body (a renewing one, as KIP-1222 asks, with every limit 0). `forget`: take the
        topic-partition out of the session instead of fetching it."""
        limits = dict(max_wait=0, min_bytes=0, max_bytes=0) if renew else dict(max_wait=wait_ms, min_bytes=1,
                                                                               max_bytes=1 << 20)
        v2 = dict(share_acquire_mode=mode, is_renew_ack=renew) if version >= 2 else {}
        answer = self.client.request(SHARE_FETCH, version, group_id=self.group, member_id=self.member,
                                     share_session_epoch=self.epoch, max_records=max_records,
                                     batch_size=max(max_records, 1),
                                     forgotten_topics_data=[{"topic_id": topic_id_of(self.topic), "partitions": [0]}]
                                     if forget else [], topics=[] if forget else self.topics(list(acks)),
                                     **limits, **v2)
        if answer.error_code == ErrorCode.none:
            self.epoch += 1
        return answer

    def acquired(self, max_records: int, **options) -> list[Batch]:
        """The records one ShareFetch acquired, as (first, last, delivery count)."""
        answer = self.fetch(max_records, **options)
        check(answer.error_code == ErrorCode.none, f"ShareFetch answered {answer.error_code.name}")
        return [(batch.first_offset, batch.last_offset, batch.delivery_count)
                for topic in answer.responses for partition in topic.partitions for batch in partition.acquired_records]

    def acknowledge(self, acks: list[Batch], version: int = 1, renew: bool = False) -> ErrorCode:
        """One ShareAcknowledge; the partition's error."""
        v2 = dict(is_renew_ack=renew) if version >= 2 else {}
        answer = self.client.request(SHARE_ACKNOWLEDGE, version, group_id=self.group, member_id=self.member,
                                     share_session_epoch=self.epoch, topics=self.topics(acks), **v2)
        check(answer.error_code == ErrorCode.none, f"ShareAcknowledge answered {answer.error_code.name}")
        self.epoch += 1
        return answer.responses[0].partitions[0].error_code


def _produce_one_partition(broker: EmbeddedBroker, topic: str, count: int) -> None:
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [(0, None, f"{topic}-{index}".encode()) for index in range(count)])


def _expect(answer: ErrorCode, expected: ErrorCode, what: str) -> None:
    check(answer == expected, f"{what}: answered {answer.name}, expected {expected.name}")


def record_limit(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                 profile: str = "kafka-4.2") -> ScenarioResult:
    """Two members take turns with record_limit fetches of 3: each gets exactly 3 records while 3 are left."""
    def body(broker: EmbeddedBroker) -> str:
        _produce_one_partition(broker, "orders", 10)
        members = [WireMember(broker.port, "g", name, "orders") for name in ("m1", "m2")]
        delivered: list[int] = []
        for turn in range(8):
            runs = members[turn % 2].acquired(3, mode=RECORD_LIMIT)
            offsets = [offset for first, last, _ in runs for offset in range(first, last + 1)]
            check(len(offsets) == min(3, 10 - len(delivered)), f"a record_limit fetch of 3 acquired {runs}")
            check(all(count == 1 for _, _, count in runs), f"first deliveries counted {runs}")
            delivered += offsets
            if offsets:
                _expect(members[turn % 2].acknowledge([(offsets[0], offsets[-1], ACCEPT)]), ErrorCode.none, "accept")
        check(sorted(delivered) == list(range(10)), f"delivered {delivered}")
        for member in members:
            member.close()
        return "10 records in fetches of exactly 3 (record_limit), each delivered once"

    return run_scenario("kafka42-record-limit", work_dir, EARLIEST, body, launcher, profile)


def renew(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER, profile: str = "kafka-4.2") -> ScenarioResult:
    """RENEW by ShareAcknowledge v2 and by a renewing ShareFetch; refused without IsRenewAck and in v1
    (under `kip`: always refused)."""
    renewed = ErrorCode.none if profile == "kafka-4.2" else ErrorCode.invalid_request

    def body(broker: EmbeddedBroker) -> str:
        _produce_one_partition(broker, "orders", 4)
        member = WireMember(broker.port, "g", "m1", "orders")
        runs = member.acquired(100)
        check(runs and runs[0][0] == 0 and runs[-1][1] == 3, f"the first fetch acquired {runs}")
        _expect(member.acknowledge([(0, 1, RENEW)], version=2, renew=True), renewed, "RENEW, v2, IsRenewAck")
        _expect(member.acknowledge([(0, 1, RENEW)], version=2), ErrorCode.invalid_request, "RENEW without IsRenewAck")
        _expect(member.acknowledge([(0, 1, RENEW)], version=1), ErrorCode.invalid_request, "RENEW in v1")
        check(member.fetch(1, acks=[(2, 3, RENEW)], renew=True).error_code == ErrorCode.invalid_request,
              "a renewing ShareFetch with MaxRecords 1 was not refused")
        renewing = member.fetch(0, acks=[(2, 3, RENEW)], renew=True)
        partition = renewing.responses[0].partitions[0]
        check(renewing.error_code == ErrorCode.none and partition.acknowledge_error_code == renewed,
              f"a renewing ShareFetch answered {renewing.error_code.name}/{partition.acknowledge_error_code}")
        check(not partition.acquired_records, "a renewing ShareFetch acquired records")
        _expect(member.acknowledge([(0, 3, ACCEPT)]), ErrorCode.none, "accepting the renewed records")
        member.close()
        return "RENEW answered as the profile says; the records stayed with their member until accepted"

    return run_scenario("kafka42-renew", work_dir, EARLIEST, body, launcher, profile)


def acknowledgements_around_spso(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                                 profile: str = "kafka-4.2") -> ScenarioResult:
    """Batches sharing an offset below and at SPSO (SP-11); a batch straddling SPSO of an empty window (SP-40).
    Under `kip` shared offsets are malformed and a batch past SPEO is INVALID_REQUEST (SP-10, SP-13)."""
    kafka = profile == "kafka-4.2"

    def body(broker: EmbeddedBroker) -> str:
        _produce_one_partition(broker, "orders", 10)
        member = WireMember(broker.port, "g", "m1", "orders")
        acquired: list[Batch] = []
        while sum(last - first + 1 for first, last, _ in acquired) < 10:
            more = member.acquired(100)
            check(more, f"10 records produced, {acquired} acquired")
            acquired += more
        _expect(member.acknowledge([(0, 3, ACCEPT), (3, 5, ACCEPT)]),
                ErrorCode.invalid_record_state if kafka else ErrorCode.invalid_request, "batches sharing offset 3, at SPSO 0")
        _expect(member.acknowledge([(0, 5, ACCEPT)]), ErrorCode.none, "accept 0-5")
        _expect(member.acknowledge([(0, 5, ACCEPT), (5, 9, ACCEPT)]),
                ErrorCode.none if kafka else ErrorCode.invalid_request, "batches sharing offset 5, below SPSO 6")
        if not kafka:
            _expect(member.acknowledge([(6, 9, ACCEPT)]), ErrorCode.none, "accept 6-9")
        _expect(member.acknowledge([(8, 11, ACCEPT)]),
                ErrorCode.invalid_record_state if kafka else ErrorCode.invalid_request,
                "a batch straddling SPSO 10 of an empty window")
        member.close()
        return "shared offsets and a batch straddling SPSO answered as the kafka-4.2 profile says"

    return run_scenario("kafka42-acks-around-spso", work_dir, EARLIEST, body, launcher, profile)


def throttled_redelivery(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                         profile: str = "kafka-4.2") -> ScenarioResult:
    """Delivery limit 3: records released twice come back one by one on their last delivery (SP-43);
    under `kip` they come back together."""
    def body(broker: EmbeddedBroker) -> str:
        _produce_one_partition(broker, "orders", 3)
        member = WireMember(broker.port, "g", "m1", "orders")
        for delivery in (1, 2):
            runs = member.acquired(100)
            check(runs == [(0, 2, delivery)], f"delivery {delivery} acquired {runs}")
            _expect(member.acknowledge([(0, 2, RELEASE)]), ErrorCode.none, "release")
        last = [member.acquired(100) for _ in range(3 if profile == "kafka-4.2" else 1)]
        expected = [[(offset, offset, 3)] for offset in range(3)] if profile == "kafka-4.2" else [[(0, 2, 3)]]
        check(last == expected, f"the last deliveries were {last}")
        member.close()
        return f"last deliveries: {last}"

    return run_scenario("kafka42-throttled-redelivery", work_dir,
                        {**EARLIEST, "group.share.delivery.count.limit": "3"}, body, launcher, profile)


def _second_member_acquires(broker: EmbeddedBroker, profile: str) -> list[Batch]:
    """Once the first member's connection closed, a second member acquires records 0-2: from their persisted
    state (count 1) where the group was emptied (SS-31), else released by the first (count 2). It accepts them."""
    second = WireMember(broker.port, "g", "m2", "orders")
    deadline = time.monotonic() + WAIT_S
    runs: list[Batch] = []
    while not runs and time.monotonic() < deadline:   # until the broker has seen the first connection close
        runs = second.acquired(100)
    expected = [(0, 2, 1)] if profile == "kafka-4.2" else [(0, 2, 2)]
    check(runs == expected, f"the second member acquired {runs}, expected {expected}")
    _expect(second.acknowledge([(0, 2, ACCEPT)]), ErrorCode.none, "accept")
    second.close()
    return runs


def forgotten_partition_and_empty_group(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                                        profile: str = "kafka-4.2") -> ScenarioResult:
    """A member acquires, forgets the partition, and its connection closes as the group's last session:
    kafka-4.2 releases nothing there (SS-30) but drops the group's share-partitions (SS-31), so the next
    member gets the records from their persisted state, delivery count 1 again; kip releases them (count 2)."""
    def body(broker: EmbeddedBroker) -> str:
        _produce_one_partition(broker, "orders", 3)
        first = WireMember(broker.port, "g", "m1", "orders")
        check(first.acquired(100) == [(0, 2, 1)], "the first member did not acquire 0-2")
        check(first.fetch(0, forget=True).error_code == ErrorCode.none, "forgetting the partition was refused")
        first.close()
        runs = _second_member_acquires(broker, profile)
        return f"after the first member's connection closed, the second acquired {runs}"

    return run_scenario("kafka42-forgotten-and-empty-group", work_dir, EARLIEST, body, launcher, profile)


def stale_session_empties_group(work_dir: Path, launcher: tuple[str, ...] = DEFAULT_LAUNCHER,
                                profile: str = "kafka-4.2") -> ScenarioResult:
    """A member acquires, forgets the partition and ends its session with a final ShareAcknowledge (which
    releases nothing there, SS-30), then its connection closes: under kafka-4.2 that close still runs the group-empty
    check (the session was stale, SS-31), so the next member gets the records from their persisted state with
    delivery count 1 at once; kip's final request released them (count 2)."""
    def body(broker: EmbeddedBroker) -> str:
        _produce_one_partition(broker, "orders", 3)
        first = WireMember(broker.port, "g", "m1", "orders")
        check(first.acquired(100) == [(0, 2, 1)], "the first member did not acquire 0-2")
        check(first.fetch(0, forget=True).error_code == ErrorCode.none, "forgetting the partition was refused")
        final = first.client.request(SHARE_ACKNOWLEDGE, 1, group_id="g", member_id="m1", share_session_epoch=-1,
                                     topics=[])
        check(final.error_code == ErrorCode.none, f"the final ShareAcknowledge answered {final.error_code.name}")
        first.close()
        runs = _second_member_acquires(broker, profile)
        return f"after the first member's final request and connection close, the second acquired {runs}"

    # A lock long enough that only the group-empty check, not an expiry, can free the records in time.
    return run_scenario("kafka42-stale-session-empties-group", work_dir,
                        {**EARLIEST, "group.share.record.lock.duration.ms": "60000"}, body, launcher, profile)


SCENARIOS: dict[str, Callable[..., ScenarioResult]] = {
    "kafka42-forgotten-and-empty-group": forgotten_partition_and_empty_group,
    "kafka42-stale-session-empties-group": stale_session_empties_group,
    "kafka42-throttled-redelivery": throttled_redelivery,
    "kafka42-record-limit": record_limit,
    "kafka42-renew": renew,
    "kafka42-acks-around-spso": acknowledgements_around_spso,
}
