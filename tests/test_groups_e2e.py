"""Consumer groups end to end: real confluent-kafka Consumers (classic range, roundrobin, cooperative-sticky;
KIP-848 uniform and range) on the reference broker, its AdminClient on both group types, and two seeded
bugs the same scenarios must catch.

Run as a script, this module is a `kipcheck broker` launcher that first
installs one seeded bug, named by its first argument, in this test-only
process; the production path is untouched:
- `volatile-offsets`: OffsetCommit is answered NONE but never written to disk;
- `assign-before-revoke`: a KIP-848 member is given partitions another
  member has not yet revoked.
"""

from __future__ import annotations

import sys
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient

from kipcheck.oracle.conformance.scenarios.clients import QUIET, create_topic, produce
from kipcheck.oracle.conformance.targets.embedded import EmbeddedBroker
from kipcheck.oracle.conformance.scenarios.groups import SCENARIOS as GROUP_SCENARIOS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", list(GROUP_SCENARIOS))
def test_group_scenario(name, tmp_path):
    result = GROUP_SCENARIOS[name](tmp_path / name)
    assert result.ok, result.detail
    print(result.summary(), result.detail)


def test_the_admin_client_lists_describes_and_moves_offsets_of_both_group_types(tmp_path):
    settings = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "300"}
    with EmbeddedBroker(tmp_path / "admin", settings) as broker:
        create_topic(broker.bootstrap, "t", 2)
        produce(broker.bootstrap, "t", [(index % 2, None, b"x") for index in range(10)])
        consumers = {protocol: Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{protocol}",
                                         "group.protocol": protocol, "auto.offset.reset": "earliest", **QUIET})
                     for protocol in ("consumer", "classic")}
        for consumer in consumers.values():
            consumer.subscribe(["t"])
        try:
            for consumer in consumers.values():
                read, deadline = 0, time.monotonic() + 60
                while read < 10 and time.monotonic() < deadline:
                    message = consumer.poll(0.2)
                    read += message is not None and message.error() is None
                assert read == 10
                consumer.commit(asynchronous=False)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
            listed = {group.group_id: group.type for group in admin.list_consumer_groups().result(30).valid}
            assert listed == {"g-consumer": ConsumerGroupType.CONSUMER, "g-classic": ConsumerGroupType.CLASSIC}
            described = {group_id: future.result(30) for group_id, future in
                         admin.describe_consumer_groups(["g-consumer", "g-classic"]).items()}
            assert described["g-consumer"].partition_assignor == "uniform"
            assert described["g-classic"].partition_assignor == "range"
            for group in described.values():
                assert group.state == ConsumerGroupState.STABLE
                assert sorted(tp.partition for tp in group.members[0].assignment.topic_partitions) == [0, 1]
        finally:
            for consumer in consumers.values():
                consumer.close()
        moved = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("g-classic", [TopicPartition("t", 0, 2)])])
        assert all(future.result(30) for future in moved.values())
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g-classic")])["g-classic"].result(30)
        assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 2), (1, 5)]


def seeded(bug: str) -> tuple[str, ...]:
    return (sys.executable, __file__, bug, "broker")


def test_offsets_answered_but_not_written_are_caught_by_a_broker_kill(tmp_path):
    result = GROUP_SCENARIOS["groups-broker-killed"](tmp_path / "bug", launcher=seeded("volatile-offsets"))
    assert not result.ok and "after restart" in result.detail, result.detail


def test_partitions_given_before_their_revocation_are_caught_owned_twice(tmp_path):
    # Members take 1.5 s (five heartbeats) to let a revoked partition go, so a broker that hands it over
    # before the revocation is acknowledged always gives it to the new owner first.
    result = GROUP_SCENARIOS["groups-consumer-uniform"](tmp_path / "bug", launcher=seeded("assign-before-revoke"),
                                                        revoke_s=1.5)
    assert not result.ok and "owned by members" in result.detail, result.detail


def install_seeded_bug(bug: str) -> None:
    if bug == "volatile-offsets":
        from kipcheck.impl.groups.offsets import OffsetStore

        OffsetStore._store = lambda self, record: self._apply(record)
    elif bug == "assign-before-revoke":
        from kipcheck.impl.groups.consumer_group import ConsumerGroup

        ConsumerGroup.owned_by_others = lambda self, member_id: set()
    else:
        raise SystemExit(f"unknown seeded bug {bug!r}")


if __name__ == "__main__":
    install_seeded_bug(sys.argv[1])
    from kipcheck.cli import main

    raise SystemExit(main(sys.argv[2:]))
