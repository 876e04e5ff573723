"""Where a probe's requests go on a cluster: the broker that leads its topics, and its group's coordinator.

    brokers = cluster_brokers(connection)                  # {node id: (host, port)}, from Metadata
    host, port = find_coordinator(connection, group)       # FindCoordinator, retried while the coordinator loads
    answer = retry_on_coordinator(lambda: send(...), refind)

A broker with one node answers both with itself. On a cluster the group coordinator (and the share
coordinator) may sit on other brokers than the partition leaders, and a fresh Kafka has no group coordinator at
all until FindCoordinator makes it create __consumer_offsets: until then group requests are answered
COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, which a client retries, as librdkafka does.
"""

from __future__ import annotations

import time
from typing import Callable

from kipcheck.impl.consumer.connection import BrokerConnection

FIND_COORDINATOR = 10
GROUP_KEY = 0
COORDINATOR_WAIT_S = 60.0
RETRY_PAUSE_S = 0.1
# The answers that say "ask again, perhaps elsewhere": the coordinator is moving, loading or not there yet.
COORDINATOR_RETRIABLE = frozenset({"not_coordinator", "coordinator_not_available", "coordinator_load_in_progress"})


class RoutingError(RuntimeError):
    """The cluster did not say where a request goes within COORDINATOR_WAIT_S."""


def cluster_brokers(connection: BrokerConnection) -> dict[int, tuple[str, int]]:
    answer = connection.request(3, 12, topics=[], allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)
    return {broker.node_id: (broker.host, broker.port) for broker in answer.brokers}


def find_coordinator(connection: BrokerConnection, group: str, version: int = 4) -> tuple[str, int]:
    """The address of `group`'s coordinator (FindCoordinator v4, batched keys; or v2, one key, where a broker serves
    no later one), asked until the cluster has one."""
    deadline = time.monotonic() + COORDINATOR_WAIT_S
    while True:
        if version >= 4:
            found = connection.request(FIND_COORDINATOR, version, key_type=GROUP_KEY,
                                       coordinator_keys=[group]).coordinators[0]
        else:
            found = connection.request(FIND_COORDINATOR, version, key=group, key_type=GROUP_KEY)
        if found.error_code.name == "none":
            return found.host, found.port
        if found.error_code.name not in COORDINATOR_RETRIABLE or time.monotonic() > deadline:
            raise RoutingError(f"FindCoordinator for group {group}: {found.error_code.name.upper()}")
        time.sleep(RETRY_PAUSE_S)


def retry_on_coordinator(send: Callable, refind: Callable[[], None]):
    """`send()`'s answer, sent again (after `refind()`) while it says the coordinator is not ready or moved."""
    deadline = time.monotonic() + COORDINATOR_WAIT_S
    while True:
        answer = send()
        if answer.error_code.name not in COORDINATOR_RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(RETRY_PAUSE_S)
        refind()
